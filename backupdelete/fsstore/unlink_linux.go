//go:build linux

package fsstore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"syscall"
	"unsafe"
)

// newGroupRemover on Linux unlinks with openat, fstatat and unlinkat
// relative to the blocks directory's descriptor: os.Root's path splitting
// and bookkeeping cost about as much per block as the unlink of a small
// file. It is as strict as the os.Root path and stricter in one way: each
// bucket level is opened one component at a time with
// O_DIRECTORY|O_NOFOLLOW, so a symlinked bucket is never followed, even
// one leading inside its first-level bucket (os.Root follows that; a full
// listing never enters one either, so now both agree). A second-level
// bucket is opened O_PATH: it is only ever a directory descriptor for the
// *at calls, and such an open skips what opening a directory for reading
// costs (a symlink there is refused just the same: ENOTDIR). A failure to
// open a bucket fails its blocks, except that a bucket that is gone means
// its blocks are gone.
//
// Just before each unlink the name is looked at (fstatat, no symlink
// followed, nothing opened) through the very descriptor the unlink uses:
// only a regular file is unlinked, as in a full collection's sweep.
// Whatever else is at a candidate's name (a FIFO, a symlink, a directory,
// empty or not) is no block file and stays, counted neither removed nor
// failed; unlinkat without AT_REMOVEDIR never removes a directory.
func newGroupRemover(vol *os.Root) (groupRemover, func(), error) {
	blocks, err := openDirFile(vol, blocksDir)
	if errors.Is(err, fs.ErrNotExist) {
		// Every bucket is gone, so every block is.
		return func(_ context.Context, group []string) (int, []string) { return len(group), nil }, func() {}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	rc, err := blocks.SyscallConn()
	if err != nil {
		blocks.Close()
		return nil, nil, err
	}
	blocksFD := -1
	if err := rc.Control(func(u uintptr) { blocksFD = int(u) }); err != nil {
		blocks.Close()
		return nil, nil, err
	}
	remove := func(ctx context.Context, group []string) (n int, bad []string) {
		fa, err := openPathDir(blocksFD, group[0][0:2])
		if err == syscall.ENOENT {
			return len(group), nil // the whole bucket is gone
		}
		if err != nil {
			return 0, group
		}
		defer syscall.Close(fa)
		var name []byte // <ck>.blk, NUL-terminated
		for _, ck := range group {
			if ctx.Err() != nil {
				break
			}
			fb, err := openPathDir(fa, ck[2:4])
			if err == syscall.ENOENT {
				n++ // its bucket is gone
				continue
			}
			if err != nil {
				bad = append(bad, ck)
				continue
			}
			name = append(append(append(name[:0], ck...), blockSuffix...), 0)
			gone, err := unlinkRegularAt(fb, &name[0])
			syscall.Close(fb)
			switch {
			case err != nil:
				bad = append(bad, ck)
			case gone:
				n++
			}
		}
		return n, bad
	}
	// blocks stays open (its descriptor valid) until removeBlocks is done.
	return remove, func() { blocks.Close() }, nil
}

// unlinkRegularAt unlinks dirfd/name (NUL-terminated) if it is a regular
// file when looked at just before: gone says it is gone now (unlinked, or
// already absent); false and no error means something else is there and
// stays.
func unlinkRegularAt(dirfd int, name *byte) (gone bool, err error) {
	regular, err := regularAt(dirfd, name)
	switch {
	case err == syscall.ENOENT:
		return true, nil
	case err != nil:
		return false, err
	case !regular:
		return false, nil
	}
	if err := unlinkatPtr(dirfd, name, 0); err != nil && err != syscall.ENOENT {
		return false, err
	}
	return true, nil
}

// openPathDir opens parent/name O_PATH as a directory, following no
// symlink: a symlink, FIFO or file there is ENOTDIR, and nothing is
// opened for I/O.
func openPathDir(parent int, name string) (int, error) {
	return openat(parent, name, oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC)
}

// unlinkatPtr is unlinkat(2) with a NUL-terminated name.
func unlinkatPtr(dirfd int, p *byte, flags int) error {
	for {
		_, _, e := syscall.Syscall(syscall.SYS_UNLINKAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(flags))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}
