//go:build linux && !amd64 && !arm64

package fsstore

import (
	"syscall"
	"unsafe"
)

// lstatAt elsewhere on Linux opens name O_PATH|O_NOFOLLOW (which opens
// nothing for I/O: a FIFO never blocks, a device is never opened, a
// symlink is looked at itself) and fstats that descriptor: portable
// through the syscall package, at three system calls instead of one.
// name is NUL-terminated.
func lstatAt(dirfd int, name *byte, st *syscall.Stat_t) error {
	path := unsafe.String(name, nulLen(name))
	for {
		fd, err := syscall.Openat(dirfd, path, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		err = syscall.Fstat(fd, st)
		syscall.Close(fd)
		return err
	}
}

// nulLen is the length of the NUL-terminated string at p.
func nulLen(p *byte) int {
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return n
}
