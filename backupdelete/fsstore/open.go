package fsstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/internal/safefile"
)

// ErrFileType: a backupstore path holds something other than what the
// layout puts there: a FIFO, socket, device or symlink where a regular
// file or a directory belongs. Nothing is read, listed or removed through
// it, and it is never opened in a way that could block (a FIFO opened for
// reading waits for a writer forever). Errors wrapping it are
// *FileTypeError values and also wrap backupdelete.ErrCorrupt.
var ErrFileType = errors.New("fsstore: unexpected file type")

// FileTypeError says which path had the wrong type.
type FileTypeError struct {
	// Path is relative to the directory it was looked up in (the mount
	// point or a volume directory).
	Path string
	// Mode is the type found (fs.ModeNamedPipe, fs.ModeSymlink...).
	Mode fs.FileMode
	// Want is "regular file" or "directory".
	Want string
}

func (e *FileTypeError) Error() string {
	return fmt.Sprintf("fsstore: %s is %s, not a %s", e.Path, safefile.Describe(e.Mode), e.Want)
}

// Unwrap returns ErrFileType and backupdelete.ErrCorrupt.
func (e *FileTypeError) Unwrap() []error { return []error{ErrFileType, backupdelete.ErrCorrupt} }

// Every open in this package goes through openRegular or openDir: the
// type is read with Lstat (which opens nothing and never follows a
// symlink) before anything is opened, a regular file is then opened with
// O_NONBLOCK (so a FIFO swapped in meanwhile cannot block the open), a
// directory through "<name>/." (the kernel opens "<name>" with
// O_DIRECTORY, which fails at once on anything that is not one), and the
// opened file must be the one Lstat saw. All of it is inside an os.Root,
// so no path leads out of the mount point.

// openRegular opens root/name for reading if it is a regular file (not a
// symlink to one). A missing file is an error wrapping fs.ErrNotExist.
//
// A regular file replaced by another between the look and the open (a
// concurrent deletion renaming its new volume.cfg over the old one) is
// no type swap: the open is tried again, a few times.
func openRegular(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	for try := 0; ; try++ {
		f, info, err := safefile.OpenRegular(root, name)
		if te := (*safefile.TypeError)(nil); errors.As(err, &te) {
			if te.Swapped && te.Mode.IsRegular() && try < 3 {
				continue
			}
			return nil, nil, &FileTypeError{Path: name, Mode: te.Mode, Want: "regular file"}
		}
		return f, info, err
	}
}

// checkRegularOrAbsent returns nil if root/name is a regular file or does
// not exist, and a *FileTypeError otherwise: what a removal of a cfg or a
// lock file checks first.
func checkRegularOrAbsent(root *os.Root, name string) error {
	info, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return &FileTypeError{Path: name, Mode: info.Mode(), Want: "regular file"}
	}
	return nil
}

// lstatDir returns root/name's info if it is a directory (not a symlink
// to one).
func lstatDir(root *os.Root, name string) (fs.FileInfo, error) {
	info, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, &FileTypeError{Path: name, Mode: info.Mode(), Want: "directory"}
	}
	return info, nil
}

// openDir opens root/name as an os.Root if it is a directory (not a
// symlink to one). A missing one is an error wrapping fs.ErrNotExist.
func openDir(root *os.Root, name string) (*os.Root, error) {
	before, err := lstatDir(root, name)
	if err != nil {
		return nil, err
	}
	sub, err := root.OpenRoot(name + "/.")
	if err != nil {
		return nil, err
	}
	info, err := sub.Stat(".")
	if err != nil {
		sub.Close()
		return nil, err
	}
	if !os.SameFile(before, info) {
		sub.Close()
		return nil, &FileTypeError{Path: name, Mode: fs.ModeSymlink, Want: "directory"}
	}
	return sub, nil
}

// openDirFile opens root/name as a file for listing if it is a directory
// (not a symlink to one).
func openDirFile(root *os.Root, name string) (*os.File, error) {
	before, err := lstatDir(root, name)
	if err != nil {
		return nil, err
	}
	f, err := root.Open(name + "/.")
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.IsDir() || !os.SameFile(before, info) {
		f.Close()
		return nil, &FileTypeError{Path: name, Mode: info.Mode(), Want: "directory"}
	}
	return f, nil
}
