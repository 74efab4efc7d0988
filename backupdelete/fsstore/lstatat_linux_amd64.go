//go:build linux

package fsstore

import "syscall"

// sysFstatat is fstatat's number here (see lstatAt).
const sysFstatat = syscall.SYS_NEWFSTATAT
