package diskscan

import "syscall"

// fstatat is fstatat(2).
func fstatat(dirfd int, name string, st *syscall.Stat_t, flags int) error {
	for {
		if err := syscall.Fstatat(dirfd, name, st, flags); err != syscall.EINTR {
			return err
		}
	}
}
