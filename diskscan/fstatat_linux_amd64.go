package diskscan

import (
	"syscall"
	"unsafe"
)

// fstatat is fstatat(2) (newfstatat on amd64), which package syscall
// does not export here.
func fstatat(dirfd int, name string, st *syscall.Stat_t, flags int) error {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_NEWFSTATAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(st)), uintptr(flags), 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		}
		return errno
	}
}
