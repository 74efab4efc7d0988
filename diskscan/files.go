package diskscan

import (
	"errors"
	"io/fs"
	"os"

	"github.com/caretaker-storage/caretaker/internal/safefile"
)

// Every file diskscan reads is opened as a regular file only, and every
// directory it lists or walks is reached through an os.Root (or, for a
// scan's validations on Linux, opened by single names without following
// links relative to a descriptor of <disk>/replicas: see validateAt), so
// that nothing on a disk can block a scan or lead it outside the disk.

// openListing opens the directory rr holds for listDir, and returns its
// stamp (fstat'ed before any entry is read, so a change made during the
// listing moves the stamp the next scan compares) and whether it has one.
func openListing(rr *os.Root) (*os.File, dirStamp, bool, error) {
	dir, err := rr.Open(".")
	if err != nil {
		return nil, dirStamp{}, false, err
	}
	fi, err := dir.Stat()
	if err != nil {
		dir.Close()
		return nil, dirStamp{}, false, err
	}
	st, ok := stampOf(fi)
	return dir, st, ok, nil
}

// listDir lists dir (opened by openListing), unsorted: sorting 100k names
// would cost more than the rest of a scan, and only the few orphans and
// skips need an order.
//
// A directory opened through an os.Root lstat's every entry while listing
// (its entries cannot load their FileInfo lazily), which would double the
// cost of a scan; a descriptor duplicated from it is an ordinary File that
// lists with the types the kernel returns, of the very same directory.
func listDir(dir *os.File) ([]fs.DirEntry, error) {
	fd, err := dupFd(dir)
	if err != nil {
		return nil, err
	}
	plain := os.NewFile(fd, dir.Name())
	defer plain.Close()
	return plain.ReadDir(-1)
}

// listRoot lists the directory rr holds, as listDir does.
func listRoot(rr *os.Root) ([]fs.DirEntry, error) {
	dir, err := rr.Open(".")
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	return listDir(dir)
}

// openReplicas opens <disk>/replicas as a root of its own. It returns nil
// and no error if there is none. A replicas directory that is a mount
// point is refused (see replicasOfDisk).
func openReplicas(root *os.Root) (*os.Root, error) {
	fi, err := root.Lstat(ReplicasDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, err
	case !fi.IsDir():
		return nil, refuse(ErrDiskInvalid, "%s is a %s, not a directory", ReplicasDir, fi.Mode().Type())
	}
	rr, err := root.OpenRoot(ReplicasDir)
	if err != nil {
		return nil, err
	}
	if err := replicasOfDisk(root, rr); err != nil {
		rr.Close()
		return nil, err
	}
	return rr, nil
}

// replicasOfDisk refuses, with ErrMountPoint, a <disk>/replicas (held by
// rr) that is not in the filesystem and mount of the disk directory
// (root): a mount point there (another disk's replicas directory
// bind-mounted, another filesystem) holds directories the disk's identity
// checks (its longhorn-disk.cfg, its filesystem ID) say nothing about,
// and whose replicas the disk's expected set does not list. Longhorn
// keeps replica directories in the disk's own filesystem.
func replicasOfDisk(root, rr *os.Root) error {
	disk, err := boundaryOf(root)
	if err != nil {
		return err
	}
	replicas, err := boundaryOf(rr)
	if err != nil {
		return err
	}
	if disk != replicas {
		return refuse(ErrMountPoint, "%s is a mount point (device %#x mount %d; the disk directory's are %#x and %d): its directories are not the disk's", ReplicasDir, replicas.dev, replicas.mnt, disk.dev, disk.mnt)
	}
	return nil
}

// readMeta reads <name>/volume.meta inside rr; it must be a regular file.
func readMeta(rr *os.Root, name string, limit int64) (VolumeMeta, error) {
	f, err := openRegular(rr, name+"/"+MetaFile, MetaFile)
	if err != nil {
		return VolumeMeta{}, err
	}
	defer f.Close()
	return ReadVolumeMeta(f, limit)
}

// openRegular opens name inside root for reading, and only if it is a
// regular file (internal/safefile): a FIFO would block the open, a device
// could have effects on open, and a socket cannot be read at all.
// Anything else is a *ParseError for input wrapping ErrNotRegular.
func openRegular(root *os.Root, name, input string) (*os.File, error) {
	f, _, err := safefile.OpenRegular(root, name)
	var te *safefile.TypeError
	switch {
	case errors.As(err, &te) && te.Swapped:
		return nil, &ParseError{Input: input, Reason: "replaced by another file while being opened", Err: ErrNotRegular}
	case errors.As(err, &te):
		return nil, notRegular(input, te.Mode)
	}
	return f, err
}

// notRegular says what a non-regular file is.
func notRegular(input string, mode fs.FileMode) error {
	return &ParseError{Input: input, Reason: safefile.Describe(mode) + ", not a regular file", Err: ErrNotRegular}
}

func isTombstone(name string) bool { return looksLikeTombstone(name) }

func isMarker(name string) bool { _, m, ok := parsePurgeEntry(name); return ok && m }

// errText is an error without the path prefix the os package adds, so
// reports do not repeat absolute paths.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
