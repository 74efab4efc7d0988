package diskscan

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"

	"github.com/caretaker-storage/caretaker/internal/safefile"
)

// Only our own tombstones are ever removed. Before renaming a directory to
// its tombstone, Delete writes the purge's marker
// (.caretaker-mark.<name>.<token>.mark) beside it in
// <disk>/replicas and makes it durable (fsync of the file and of the
// directory). The marker records the directory's name, the tombstone's
// name (which carries the purge's random token), and the directory's
// device and inode. A tombstone is ours only if it is a real directory,
// its marker exists, is a regular file, parses, names it, and records its
// device and inode. Anything else that looks like a tombstone (made by
// someone else, by a caretaker that wrote no markers, a symbolic link, a
// file) is reported and left alone. The marker is removed after its
// tombstone; a marker whose tombstone is gone (a crash before the rename
// or after the removal) is stale and removed.

const (
	markerFormat = "caretaker.diskscan.purge-marker/1"
	// maxMarkerSize bounds a marker read.
	maxMarkerSize = 4 << 10
)

// purgeMarker is a marker file's content.
type purgeMarker struct {
	Format    string `json:"format"`
	Name      string `json:"name"`
	Tombstone string `json:"tombstone"`
	Dev       uint64 `json:"dev"`
	Ino       uint64 `json:"ino"`
}

// writeMarker makes the durable marker of p for the directory fi
// describes.
func writeMarker(rr *os.Root, p purge, fi fs.FileInfo) error {
	_, dev, ino, ok := fileIdentity(fi)
	if !ok {
		return errUnsupported
	}
	data, err := json.Marshal(purgeMarker{Format: markerFormat, Name: p.name, Tombstone: p.tombstone(), Dev: dev, Ino: ino})
	if err != nil {
		return err
	}
	f, err := rr.OpenFile(p.marker(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return syncDir(rr)
}

// removeMarker removes the marker of p if it is a regular file; anything
// else by that name is not ours and is left alone.
func removeMarker(rr *os.Root, p purge) error {
	mk := p.marker()
	fi, err := rr.Lstat(mk)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return refuse(ErrForeignTombstone, "%s is %s, not a caretaker marker: left alone", mk, safefile.Describe(fi.Mode()))
	}
	if err := rr.Remove(mk); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// syncDir makes the entries of the directory rr holds durable.
func syncDir(rr *os.Root) error {
	f, err := rr.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// readMarker reads and parses the marker of p.
func readMarker(rr *os.Root, p purge) (purgeMarker, error) {
	const input = "purge marker"
	f, err := openRegular(rr, p.marker(), input)
	if err != nil {
		return purgeMarker{}, err
	}
	defer f.Close()
	data, err := readBounded(f, input, maxMarkerSize)
	if err != nil {
		return purgeMarker{}, err
	}
	var m purgeMarker
	if err := strictUnmarshal(data, &m); err != nil {
		return purgeMarker{}, corrupt(input, "%v", err)
	}
	if m.Format != markerFormat {
		return purgeMarker{}, corrupt(input, "format %q, want %q", m.Format, markerFormat)
	}
	return m, nil
}

// ownTombstone returns the tombstone of p if caretaker can prove it made
// it. Anything else is a refusal wrapping ErrForeignTombstone; nothing is
// touched.
func ownTombstone(rr *os.Root, p purge) (fs.FileInfo, error) {
	tomb := p.tombstone()
	fi, err := rr.Lstat(tomb)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, refuse(ErrForeignTombstone, "%s is %s: caretaker only makes directory tombstones; left alone", tomb, safefile.Describe(fi.Mode()))
	}
	m, err := readMarker(rr, p)
	if err != nil {
		var pe *ParseError
		if errors.Is(err, fs.ErrNotExist) {
			return nil, refuse(ErrForeignTombstone, "%s has no marker %s: not made by caretaker; left alone", tomb, p.marker())
		}
		if errors.As(err, &pe) {
			return nil, refuse(ErrForeignTombstone, "%s: marker unreadable (%v); left alone", tomb, err)
		}
		return nil, err
	}
	_, dev, ino, _ := fileIdentity(fi)
	if m.Name != p.name || m.Tombstone != tomb || m.Dev != dev || m.Ino != ino {
		return nil, refuse(ErrForeignTombstone, "%s is not the directory its marker recorded (%s, device %#x inode %d; found device %#x inode %d); left alone",
			tomb, m.Tombstone, m.Dev, m.Ino, dev, ino)
	}
	return fi, nil
}
