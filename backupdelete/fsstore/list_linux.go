//go:build linux

package fsstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// getdentsLister lists first-level buckets with openat and getdents64 in
// 64 KiB batches, relative to the blocks directory's descriptor: a full
// listing opens every second-level bucket of the volume (65,536 on a
// large one), and the portable path's Lstat, open, fstat and per-name
// allocations for each cost several times the listing itself.
//
// It is as strict as openDir: each bucket is opened one component at a
// time with O_DIRECTORY|O_NOFOLLOW, so a symlink (ELOOP) or anything but
// a directory (ENOTDIR, refused before anything is opened: a FIFO never
// blocks) is never entered, and what is listed is the very directory
// opened. An entry getdents typed as something other than a directory is
// skipped, as the portable path skips it; one it did not type (DT_UNKNOWN)
// is skipped when the open says it is not a directory; one it typed as a
// directory that is no longer one when opened fails the listing, as
// openDir's comparison does.
type getdentsLister struct {
	blocksFD int
	buf      []byte
}

// The blocks *os.File stays open until every lister is done (listBlocks
// closes it after its workers return), so its descriptor stays valid.
func newBucketLister(_ *os.Root, blocks *os.File) (bucketLister, error) {
	rc, err := blocks.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	if err := rc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return nil, err
	}
	return &getdentsLister{blocksFD: fd, buf: make([]byte, 64<<10)}, nil
}

const subdirFlags = syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC

// list adds the block files under blocks/<a>/ to out.
func (l *getdentsLister) list(a string, out *blockList) error {
	fa, err := openSubdir(l.blocksFD, a, syscall.DT_DIR)
	if err != nil || fa < 0 {
		return l.typeError(blocksDir+"/"+a, err)
	}
	defer syscall.Close(fa)
	type subdir struct {
		name string
		typ  uint8
	}
	var l2 []subdir
	if err := l.readdir(fa, func(name []byte, typ uint8) {
		if (typ == syscall.DT_DIR || typ == syscall.DT_UNKNOWN) && bucketName(string(name)) {
			l2 = append(l2, subdir{string(name), typ})
		}
	}); err != nil {
		return fmt.Errorf("%s/%s: %w", blocksDir, a, err)
	}
	for _, e := range l2 {
		b := e.name
		fb, err := openSubdir(fa, b, e.typ)
		if err != nil {
			return l.typeError(blocksDir+"/"+a+"/"+b, err)
		}
		if fb < 0 {
			continue // untyped, and not a directory
		}
		err = l.readdir(fb, func(name []byte, _ uint8) {
			if ck, ok := blockFileIn(name, a, b); ok {
				out.add(ck)
			}
		})
		syscall.Close(fb)
		if err != nil {
			return fmt.Errorf("%s/%s/%s: %w", blocksDir, a, b, err)
		}
	}
	return nil
}

// openSubdir opens parent/name as a directory, following no symlink. For
// an entry getdents did not type, "not a directory" (or gone) is -1 and
// no error.
func openSubdir(parent int, name string, typ uint8) (int, error) {
	for {
		fd, err := syscall.Openat(parent, name, subdirFlags, 0)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil && typ == syscall.DT_UNKNOWN &&
			(err == syscall.ENOTDIR || err == syscall.ELOOP || err == syscall.ENOENT):
			return -1, nil
		case err != nil:
			return -1, err
		}
		return fd, nil
	}
}

// typeError names a bucket that was a directory when listed and is not
// one (or is gone) when opened.
func (l *getdentsLister) typeError(path string, err error) error {
	if err == syscall.ENOTDIR || err == syscall.ELOOP {
		mode := fs.ModeIrregular
		if err == syscall.ELOOP {
			mode = fs.ModeSymlink
		}
		return &FileTypeError{Path: path, Mode: mode, Want: "directory"}
	}
	return &fs.PathError{Op: "open", Path: path, Err: err}
}

// readdir calls f with every entry of the directory fd but "." and "..",
// with its getdents type.
func (l *getdentsLister) readdir(fd int, f func(name []byte, typ uint8)) error {
	for {
		n, err := syscall.Getdents(fd, l.buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return os.NewSyscallError("getdents64", err)
		}
		if n <= 0 {
			return nil
		}
		buf := l.buf[:n]
		for len(buf) > 0 {
			// struct linux_dirent64: ino u64, off s64, reclen u16,
			// type u8, NUL-terminated name.
			if len(buf) < 19 {
				return errors.New("getdents64: short record")
			}
			reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
			if reclen < 19 || reclen > len(buf) {
				return errors.New("getdents64: bad record length")
			}
			name := buf[19:reclen]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			if string(name) != "." && string(name) != ".." {
				f(name, buf[18])
			}
			buf = buf[reclen:]
		}
	}
}
