//go:build linux

package diskscan

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"
)

// openat2(2) resolves a path inside a directory as if that directory were
// the root (RESOLVE_IN_ROOT): an absolute symbolic link, or ".." at the
// top, stays inside it, as the host's own lookups do. The number is the
// same on every Linux architecture (syscalls from 424 on are unified).
const (
	sysOpenat2          = 437
	resolveNoMagiclinks = 0x02
	resolveInRoot       = 0x10
)

// openHow is struct open_how of openat2(2).
type openHow struct{ flags, mode, resolve uint64 }

func hostRootSupported() error { return nil }

// openRoot opens the disk directory at path as an os.Root: the path of
// this process, or of the host root, resolved inside it (see openInRoot).
func (h hostTree) openRoot(path string) (*os.Root, error) {
	if h.root == "" {
		return os.OpenRoot(path)
	}
	f, err := openInRoot(h.root, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return rootOfDir(f)
}

// openInRoot opens directory path inside root as if root were "/": every
// symbolic link on the way, absolute ones included, and every "..", is
// resolved inside root and can never leave it. Magic links (/proc/*/fd)
// are refused. root itself is opened by following links, so that it may
// be /host/proc/1/root.
func openInRoot(root, path string) (*os.File, error) {
	hr, err := os.OpenFile(root, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHostRoot, err)
	}
	defer hr.Close()
	rel := strings.TrimLeft(filepath.Clean(path), "/")
	if rel == "" {
		rel = "."
	}
	name, err := syscall.BytePtrFromString(rel)
	if err != nil {
		return nil, &os.PathError{Op: "openat2", Path: path, Err: err}
	}
	how := openHow{
		flags:   uint64(os.O_RDONLY | syscall.O_DIRECTORY | syscall.O_CLOEXEC | syscall.O_NONBLOCK),
		resolve: resolveInRoot | resolveNoMagiclinks,
	}
	var fd uintptr
	var errno syscall.Errno
	// EAGAIN: a rename raced the resolution of ".."; the kernel asks to retry.
	for range 16 {
		fd, _, errno = syscall.Syscall6(sysOpenat2, hr.Fd(), uintptr(unsafe.Pointer(name)), uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
		if errno != syscall.EAGAIN && errno != syscall.EINTR {
			break
		}
	}
	switch {
	case errno == syscall.ENOSYS:
		return nil, fmt.Errorf("%w: resolving a disk path inside %s needs openat2(2) (Linux 5.6 or later)", ErrHostRoot, root)
	case errno == syscall.E2BIG || errno == syscall.EINVAL:
		return nil, fmt.Errorf("%w: this kernel's openat2(2) cannot resolve inside a root (%v)", ErrHostRoot, errno)
	case errno != 0:
		return nil, &os.PathError{Op: "open in host root", Path: path, Err: errno}
	}
	return os.NewFile(fd, filepath.Join(root, rel)), nil
}
