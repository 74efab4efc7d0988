// Package safefile opens the files caretaker must read (volume.meta,
// longhorn-disk.cfg, backup cfgs, lock files, replica lists) without ever
// blocking on, or reading through, something that is not a regular file.
//
// A FIFO opened for reading waits for a writer forever, a device open can
// have effects, and a symbolic link leads elsewhere. So the type is read
// with Lstat first (which opens nothing and never follows a link), the
// open is non-blocking (so a FIFO swapped in meanwhile cannot block it),
// and the open file must be the very file Lstat saw.
package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrNotRegular is wrapped by every *TypeError.
var ErrNotRegular = errors.New("not a regular file")

// TypeError says a path held something other than a regular file, or was
// replaced by another file between the type check and the open.
type TypeError struct {
	Name    string      // the path as given
	Mode    fs.FileMode // the type found
	Swapped bool        // the file changed between Lstat and open
}

func (e *TypeError) Error() string {
	if e.Swapped {
		return e.Name + " was replaced by another file while being opened"
	}
	return fmt.Sprintf("%s is %s, not a regular file", e.Name, Describe(e.Mode))
}

// Unwrap returns ErrNotRegular.
func (e *TypeError) Unwrap() error { return ErrNotRegular }

// Opener is what OpenRegular needs of a directory: *os.Root, or Dir for
// plain paths.
type Opener interface {
	Lstat(name string) (fs.FileInfo, error)
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
}

// Dir opens plain paths (relative to the working directory, or absolute),
// for tools reading a file a user named. It follows symbolic links: a user
// who names a link means its target. (Inside a disk or a backupstore, use
// an *os.Root, where a link is refused.)
type Dir struct{}

// Lstat calls os.Stat, following links.
func (Dir) Lstat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// OpenFile calls os.OpenFile.
func (Dir) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}

// OpenRegular opens name under dir for reading if it is a regular file
// (not a symbolic link to one), and returns it with its info. A missing
// file is an error wrapping fs.ErrNotExist; anything else at that name is
// a *TypeError. It never blocks on a FIFO.
func OpenRegular(dir Opener, name string) (*os.File, fs.FileInfo, error) {
	before, err := dir.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if !before.Mode().IsRegular() {
		return nil, nil, &TypeError{Name: name, Mode: before.Mode()}
	}
	f, err := dir.OpenFile(name, os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !info.Mode().IsRegular() || !os.SameFile(before, info) {
		f.Close()
		return nil, nil, &TypeError{Name: name, Mode: info.Mode(), Swapped: true}
	}
	return f, info, nil
}

// Describe names a file type for people, with its article: "a FIFO",
// "a symbolic link", "a directory", "a regular file"...
func Describe(mode fs.FileMode) string {
	switch t := mode.Type(); {
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a block device"
	case t.IsDir():
		return "a directory"
	case t == 0:
		return "a regular file"
	}
	return "an irregular file (" + mode.Type().String() + ")"
}
