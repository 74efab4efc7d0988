//go:build linux

package fsstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"unsafe"
)

// getdentsLister sweeps first-level buckets with openat, getdents64 (in
// 64 KiB batches) and unlinkat, relative to the blocks directory's
// descriptor: a full collection opens every second-level bucket of the
// volume (65,536 on a large one), and the portable path's Lstat, open,
// fstat and per-name allocations for each cost several times the listing
// itself. A bucket's unreferenced blocks are unlinked through the very
// descriptor it was listed with, so no bucket is opened twice, and the
// directory is not changed while it is being read (its listing is read
// whole first, then unlinked from).
//
// It is as strict as openDir: each bucket is opened one component at a
// time with O_DIRECTORY|O_NOFOLLOW, so a symlink (ELOOP) or anything but
// a directory (ENOTDIR, refused before anything is opened: a FIFO never
// blocks) is never entered, and what is listed and unlinked from is the
// very directory opened. An entry getdents typed as something other than
// a directory is skipped, as the portable path skips it; one it did not
// type (DT_UNKNOWN) is skipped when the open says it is not a directory;
// one it typed as a directory that is no longer one when opened fails the
// listing, as openDir's comparison does. A block's name is a block file
// only when getdents typed it a regular file, or did not type it and an
// Lstat of its path finds a regular file with the inode getdents gave.
type getdentsLister struct {
	vol      *os.Root
	blocksFD int
	buf      []byte
	// One second-level bucket's block files, read whole before any is
	// unlinked: names packed in names, each NUL-terminated (ready for a
	// system call), entry i's NUL at ends[i]-1.
	names []byte
	ends  []int
}

// The blocks *os.File stays open until every lister is done (sweepBlocks
// closes it after its workers return), so its descriptor stays valid.
func newBucketLister(vol *os.Root, blocks *os.File) (bucketLister, error) {
	rc, err := blocks.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	if err := rc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return nil, err
	}
	return &getdentsLister{vol: vol, blocksFD: fd, buf: make([]byte, 64<<10)}, nil
}

const subdirFlags = syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC

// sweep lists blocks/<a>/ and unlinks the block files unlink chooses.
func (l *getdentsLister) sweep(ctx context.Context, a string, unlink func(ck []byte) bool) (removed int, failed []string, err error) {
	fa, err := openSubdir(l.blocksFD, a, syscall.DT_DIR)
	if err == syscall.ENOENT {
		// Another deletion (compatible with ours) emptied and removed
		// it since blocks/ was listed: no block is left there.
		return 0, nil, nil
	}
	if err != nil || fa < 0 {
		return 0, nil, l.typeError(blocksDir+"/"+a, err)
	}
	defer syscall.Close(fa)
	type subdir struct {
		name string
		typ  uint8
	}
	var l2 []subdir
	if err := l.readdir(fa, func(name []byte, typ uint8, _ uint64) {
		if (typ == syscall.DT_DIR || typ == syscall.DT_UNKNOWN) && bucketName(string(name)) {
			l2 = append(l2, subdir{bucketNames[shardOf(name)], typ})
		}
	}); errors.Is(err, syscall.ENOENT) {
		return 0, nil, nil // removed, empty, by another deletion
	} else if err != nil {
		return 0, nil, fmt.Errorf("%s/%s: %w", blocksDir, a, err)
	}
	for _, e := range l2 {
		if err := ctx.Err(); err != nil {
			return removed, failed, err
		}
		b := e.name
		fb, err := openSubdir(fa, b, e.typ)
		if err == syscall.ENOENT {
			continue // emptied and removed by another deletion
		}
		if err != nil {
			return removed, failed, l.typeError(blocksDir+"/"+a+"/"+b, err)
		}
		if fb < 0 {
			continue // untyped, and not a directory
		}
		n, bad, err := l.sweepBucket(ctx, fb, a, b, unlink)
		syscall.Close(fb)
		removed += n
		failed = append(failed, bad...)
		if err != nil {
			return removed, failed, fmt.Errorf("%s/%s/%s: %w", blocksDir, a, b, err)
		}
	}
	return removed, failed, nil
}

// sweepBucket lists the second-level bucket fb (blocks/<a>/<b>) whole,
// then unlinks from it the block files unlink chooses.
func (l *getdentsLister) sweepBucket(ctx context.Context, fb int, a, b string, unlink func(ck []byte) bool) (removed int, failed []string, err error) {
	l.names, l.ends = l.names[:0], l.ends[:0]
	err = l.readdir(fb, func(name []byte, typ uint8, ino uint64) {
		if _, ok := blockFileIn(name, a, b); ok && l.regular(a, b, name, typ, ino) {
			l.names = append(l.names, name...)
			l.names = append(l.names, 0)
			l.ends = append(l.ends, len(l.names))
		}
	})
	if errors.Is(err, syscall.ENOENT) {
		// Removed, empty, by another deletion (getdents of a removed
		// directory): whatever was listed is gone too.
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	start := 0
	for _, end := range l.ends {
		name, cname := l.names[start:end-1], &l.names[start]
		start = end
		ck := name[:len(name)-len(blockSuffix)]
		if err := ctx.Err(); err != nil {
			return removed, failed, err
		}
		if !unlink(ck) || ctx.Err() != nil {
			continue
		}
		// Re-checked at the moment of the unlink: the name may have been
		// replaced since the listing (while unlink decided) by something
		// that is no block file, which stays. unlinkat without AT_REMOVEDIR
		// never removes a directory.
		regular, err := regularAt(fb, cname)
		switch {
		case err == syscall.ENOENT:
			removed++ // already gone
			continue
		case err != nil:
			failed = append(failed, string(ck))
			continue
		case !regular:
			continue
		}
		if err := unlinkatPtr(fb, cname, 0); err != nil && err != syscall.ENOENT {
			failed = append(failed, string(ck))
			continue
		}
		removed++
	}
	return removed, failed, nil
}

// oPath is Linux's O_PATH (the same on every architecture Go supports):
// the descriptor only names the file, which is not opened for I/O.
const oPath = 0x200000

// regularAt reports whether dirfd/name (NUL-terminated) is a regular file
// now, looking at name itself (lstatAt: no symlink followed, nothing
// opened, so a FIFO never blocks). An error is the lookup's errno.
func regularAt(dirfd int, name *byte) (bool, error) {
	var st syscall.Stat_t
	if err := lstatAt(dirfd, name, &st); err != nil {
		return false, err
	}
	return st.Mode&syscall.S_IFMT == syscall.S_IFREG, nil
}

// regular says whether blocks/<a>/<b>/<name>, typed typ with inode ino by
// getdents, is a regular file. An untyped entry is looked up by path (no
// symlink followed at its last component, none out of the volume), and
// counts only when it is the inode getdents listed.
func (l *getdentsLister) regular(a, b string, name []byte, typ uint8, ino uint64) bool {
	switch typ {
	case syscall.DT_REG:
		return true
	case syscall.DT_UNKNOWN:
		info, err := l.vol.Lstat(blocksDir + "/" + a + "/" + b + "/" + string(name))
		if err != nil || !info.Mode().IsRegular() {
			return false
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		return ok && uint64(st.Ino) == ino
	default:
		return false
	}
}

// openSubdir opens parent/name as a directory, following no symlink. For
// an entry getdents did not type, "not a directory" (or gone) is -1 and
// no error.
func openSubdir(parent int, name string, typ uint8) (int, error) {
	fd, err := openat(parent, name, subdirFlags)
	if err != nil && typ == syscall.DT_UNKNOWN &&
		(err == syscall.ENOTDIR || err == syscall.ELOOP || err == syscall.ENOENT) {
		return -1, nil
	}
	return fd, err
}

// bucketNames are the 256 bucket names, "00" to "ff", by value: a full
// listing names 65,536 buckets, and these cost no allocation each.
var bucketNames = func() (t [256]string) {
	for i := range t {
		t[i] = string([]byte{lowerHexDigits[i>>4], lowerHexDigits[i&15]})
	}
	return t
}()

const lowerHexDigits = "0123456789abcdef"

// openat is syscall.Openat (retried on EINTR) without its allocation for
// a short name (a bucket's), which it NUL-terminates on the stack.
func openat(dirfd int, name string, flags int) (int, error) {
	var buf [8]byte
	if len(name) >= len(buf) || strings.IndexByte(name, 0) >= 0 {
		for {
			fd, err := syscall.Openat(dirfd, name, flags, 0)
			if err != syscall.EINTR {
				return fd, err
			}
		}
	}
	copy(buf[:], name)
	for {
		r, _, e := syscall.Syscall6(syscall.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&buf[0])), uintptr(flags), 0, 0, 0)
		switch e {
		case syscall.EINTR:
			continue
		case 0:
			return int(r), nil
		default:
			return -1, e
		}
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
// with its getdents type and inode number.
func (l *getdentsLister) readdir(fd int, f func(name []byte, typ uint8, ino uint64)) error {
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
				f(name, buf[18], binary.NativeEndian.Uint64(buf[0:8]))
			}
			buf = buf[reclen:]
		}
	}
}
