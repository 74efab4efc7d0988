package salvage

import (
	"regexp"
	"slices"
	"strings"
)

// The sector rules of a volume's size (longhorn-engine pkg/util/disk:
// ReplicaSectorSize 512, VolumeSectorSize 4096).
const (
	replicaSectorSize = 512
)

// size checks volume.meta's Size against the engine's sector rules.
//
// The engine refuses to serve a replica whose size is not a multiple of
// 512 bytes (pkg/replica/replica.go construct: "size not a multiple of
// sector size"), and Longhorn never makes one (longhorn-manager
// util.RoundUpSize rounds every volume up to whole 4096-byte blocks, 2 MiB
// in later releases): such a Size is damage, refused.
//
// A Size that is a multiple of 512 but not of 4096 is one the engine
// accepts when it is run by hand. Its last, partial 4096-byte block
// cannot be read or written through the engine (diffDisk.read fails a
// block reaching past the volume with io.ErrUnexpectedEOF, and a partial
// write is a read-modify-write of that block), so no replica the engine
// wrote holds data there. The engine's read-only open, which its own
// export and backups use, takes that block from the head
// (diffDisk.lookup: past the location map); the export does the same.
func (s *inspector) size() {
	in := s.in
	switch size := in.Meta.Size; {
	case size%replicaSectorSize != 0:
		in.reason(ReasonVolumeMeta, VolumeMetaFile, "Size %d is not a multiple of %d bytes: the engine refuses to open such a replica, and Longhorn makes volumes in whole 4096-byte blocks", size, replicaSectorSize)
	case size%ExportBlockSize != 0:
		in.note("Size %d is not a multiple of 4096 (Longhorn rounds volumes up to whole blocks; the engine run by hand accepts it): the last %d bytes lie in a block the engine can neither read nor write, and are read from the head, as the engine's read-only open does", size, size%ExportBlockSize)
	}
}

// engineJournalFile is the transaction journal newer engines keep in the
// replica directory (longhorn-engine pkg/replica/journal_engine.go,
// go-common-libs wal.FileName).
const engineJournalFile = "journal.log"

// layerImage matches the image names the engine makes: heads
// (volume-head-NNN.img, replica.go nextFile) and snapshots
// (volume-snap-<name>.img).
var (
	headImage = regexp.MustCompile(`^volume-head-[0-9]+\.img$`)
	snapImage = regexp.MustCompile(`^volume-snap-.+\.img$`)
)

// interrupted names, as notes, what a snapshot, revert or expansion the
// engine did not finish leaves beside the chain. The engine makes a
// snapshot in this order (pkg/replica/replica.go createDisk): the new
// head image (createNewHead: created, then truncated), its .meta, the old
// head hard-linked as the snapshot image and then its .meta (linkDisk),
// volume.meta naming the new head, the snapshot's .meta rewritten, and
// last the old head's image, .meta and .checksum removed (rmDisk). A
// revert (revertDisk) makes a new head the same way, then volume.meta,
// then removes the old head. Every JSON file is written to a .tmp and
// renamed. So at each step volume.meta names a complete chain: the old
// one until it is rewritten, the new one after, and they hold the same
// data (a snapshot changes no block; an expansion adds zeros past the old
// size). The engine, restarted, reads the chain volume.meta names and
// ignores the rest, and so does the export; the notes say what the rest
// is, so that nobody takes it for a second copy of the data.
//
// A volume.meta that is missing or empty (a write cut by a power loss in
// a release that did not sync it) is a reason of its own; the note then
// lists the heads present, which the engine's recovery
// (tryRecoverVolumeMetaFile) chooses from by name order alone.
func (s *inspector) interrupted() {
	in := s.in
	if !s.listedAll {
		return
	}
	names := slices.Clone(s.names)
	slices.Sort(names)
	has := make(map[string]bool, len(names))
	for _, n := range names {
		has[n] = true
	}
	if !in.MetaRead {
		var heads []string
		for _, n := range names {
			if headImage.MatchString(n) {
				heads = append(heads, n)
			}
		}
		switch {
		case len(heads) > 1:
			in.note("%d heads present (%s): a snapshot, revert or expansion was cut while volume.meta was unreadable; the newest head with a .meta is the one the engine made last, and the engine's own recovery takes the first volume-head entry in name order", len(heads), strings.Join(heads, ", "))
		case len(heads) == 1:
			in.note("one head present: %s", heads[0])
		}
		return
	}
	inChain := make(map[string]bool, len(in.Layers))
	for _, l := range in.Layers {
		inChain[l.Name] = true
	}
	for _, n := range names {
		switch {
		case inChain[n]:
		case headImage.MatchString(n) && !has[n+layerMetaSuffix]:
			in.note("%s has no .meta: the engine stopped while making a new head for a snapshot, revert or expansion (the image is made before its .meta); the engine ignores it, and so does the export", n)
		case snapImage.MatchString(n) && !has[n+layerMetaSuffix]:
			in.note("%s has no .meta: the engine stopped while linking the old head as this snapshot (the image is linked before its .meta); the engine ignores it, and so does the export", n)
		case strings.HasSuffix(n, layerMetaSuffix):
			img := strings.TrimSuffix(n, layerMetaSuffix)
			if inChain[img] || !(headImage.MatchString(img) || snapImage.MatchString(img)) {
				continue
			}
			switch {
			case !has[img]:
				in.note("%s has a .meta but no image: the engine stopped while removing it (the image goes before its .meta); it is outside the chain and never read", img)
			case headImage.MatchString(img):
				in.note("%s is a head outside the chain: a snapshot, revert or expansion was cut before volume.meta named it, or after, before the old head was removed; the engine reads the chain volume.meta names (head %s), and so does the export", img, in.Meta.Head)
			}
		}
	}
}
