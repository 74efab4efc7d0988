//go:build linux && (amd64 || arm64)

package fsstore

import (
	"syscall"
	"unsafe"
)

// lstatAt is fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW): one system call
// that looks at name itself (a symlink is not followed, a FIFO or device
// is not opened), where an O_PATH open, fstat and close take three. The
// syscall package has it only unexported, so it is called by number on
// the architectures whose syscall.Stat_t is the kernel's struct stat for
// it (SYS_NEWFSTATAT on amd64, SYS_FSTATAT on arm64); see
// lstatat_linux_other.go for the rest. name is NUL-terminated.
func lstatAt(dirfd int, name *byte, st *syscall.Stat_t) error {
	for {
		_, _, e := syscall.Syscall6(sysFstatat, uintptr(dirfd), uintptr(unsafe.Pointer(name)), uintptr(unsafe.Pointer(st)), atSymlinkNofollow, 0, 0)
		switch e {
		case syscall.EINTR:
			continue
		case 0:
			return nil
		default:
			return e
		}
	}
}

// atSymlinkNofollow is AT_SYMLINK_NOFOLLOW (the same on every Linux
// architecture; the syscall package does not export it everywhere).
const atSymlinkNofollow = 0x100
