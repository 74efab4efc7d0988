package salvage

import (
	"strings"

	"github.com/caretaker-storage/caretaker/internal/safefile"
)

// metadataFile reports whether name is one of the small files of a
// replica directory that describe the volume but hold none of its blocks:
// volume.meta, revision.counter, a layer's .meta and .checksum, and the
// <file>.tmp the engine writes each JSON file through (longhorn-engine
// replica.go encodeToFile; hash.go for the checksum). Every other file is
// taken as one that may hold the volume's data: a layer image, a
// snapshot left off the chain, and the leftovers of a backup restore
// (*.snap_tmp, volume-delta-*, pkg/sync/rpc/server.go) alike.
func metadataFile(name string) bool {
	base := strings.TrimSuffix(name, ".tmp")
	switch {
	case base == VolumeMetaFile, base == RevisionCounterFile:
		return true
	case strings.HasSuffix(base, ".img"+layerMetaSuffix), strings.HasSuffix(base, ".img.checksum"):
		return true
	}
	return false
}

// noData decides Inspection.NoData: true only when it is proven that the
// directory holds none of the volume's data. In order:
//
//  1. volume.meta was read and names no backing image: with one, the
//     volume's data is partly in that image, which this directory does
//     not show, and a missing or unreadable volume.meta cannot say;
//  2. the directory was listed to its end (no more than MaxEntries);
//  3. every entry that is not a metadata file (see metadataFile) is a
//     regular file that holds no data: it is empty, or it has no block
//     allocated (st_blocks) and lseek(SEEK_DATA) finds no data in it.
//     A directory, link, FIFO or device, a file that cannot be examined
//     (it vanished, a permission, a filesystem where SEEK_DATA is not
//     known to work) is taken as holding data.
//
// It never writes; a file it opens is opened read-only and non-blocking,
// after lstat said it is a regular file, only for the SEEK_DATA probe.
func (s *inspector) noData() error {
	in := s.in
	if !in.MetaRead || in.Meta.BackingFilePath != "" || !s.listedAll { // 1, 2
		return nil
	}
	if in.Allocated > 0 {
		return nil // a chain layer has blocks: no need to look further
	}
	for _, name := range s.names { // 3
		if err := s.ctx.Err(); err != nil {
			return err
		}
		fi, err := s.root.Lstat(name)
		if err != nil || (metadataFile(name) && fi.Mode().IsRegular()) {
			if err != nil {
				return nil
			}
			continue
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		if fi.Size() == 0 {
			continue
		}
		if allocated(fi) > 0 {
			return nil
		}
		empty, err := s.holdsNoData(name)
		if err != nil || !empty {
			return nil
		}
	}
	in.NoData = true
	return nil
}

// holdsNoData opens name read-only and asks the filesystem whether any
// byte of it is data (fileHasNoData).
func (s *inspector) holdsNoData(name string) (bool, error) {
	f, fi, err := safefile.OpenRegular(s.root, name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if fi.Size() == 0 {
		return true, nil
	}
	if allocated(fi) > 0 {
		return false, nil
	}
	return fileHasNoData(f)
}
