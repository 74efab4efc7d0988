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

// newGroupRemover on Linux unlinks with openat and unlinkat relative to
// the blocks directory's descriptor: os.Root's path splitting and
// bookkeeping cost about as much per block as the unlink of a small file.
// It is as strict as the os.Root path and stricter in one way: each
// bucket level is opened one component at a time with
// O_DIRECTORY|O_NOFOLLOW, so a symlinked bucket is never followed, even
// one leading inside its first-level bucket (os.Root follows that; a full
// listing never enters one either, so now both agree). A failure to open
// a bucket fails its blocks, except that a bucket that is gone means its
// blocks are gone. The final unlink is Go's os.Remove (unlinkat, then
// unlinkat AT_REMOVEDIR for an empty directory, the error chosen the same
// way), so that what is removed is exactly what the os.Root path removed.
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
		fa, err := openSubdir(blocksFD, group[0][0:2], syscall.DT_DIR)
		if err == syscall.ENOENT {
			return len(group), nil // the whole bucket is gone
		}
		if err != nil {
			return 0, group
		}
		defer syscall.Close(fa)
		for _, ck := range group {
			if ctx.Err() != nil {
				break
			}
			fb, err := openSubdir(fa, ck[2:4], syscall.DT_DIR)
			if err == syscall.ENOENT {
				n++ // its bucket is gone
				continue
			}
			if err != nil {
				bad = append(bad, ck)
				continue
			}
			err = removeAt(fb, ck+blockSuffix)
			syscall.Close(fb)
			if err != nil && err != syscall.ENOENT {
				bad = append(bad, ck)
				continue
			}
			n++
		}
		return n, bad
	}
	// blocks stays open (its descriptor valid) until removeBlocks is done.
	return remove, func() { blocks.Close() }, nil
}

// removeAt is os.Remove relative to a directory descriptor (Go's
// os.removeat): unlink a file, or else remove an empty directory.
func removeAt(dirfd int, name string) error {
	e := unlinkat(dirfd, name, 0)
	if e == nil {
		return nil
	}
	e1 := unlinkat(dirfd, name, atRemoveDir)
	if e1 == nil {
		return nil
	}
	if e1 != syscall.ENOTDIR {
		return e1
	}
	return e
}

const atRemoveDir = 0x200 // AT_REMOVEDIR

func unlinkat(dirfd int, name string, flags int) error {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	return unlinkatPtr(dirfd, p, flags)
}

// unlinkatPtr is unlinkat with a NUL-terminated name.
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
