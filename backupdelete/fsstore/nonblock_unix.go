//go:build unix

package fsstore

import "syscall"

// oNonblock makes opening a FIFO return at once instead of waiting for a
// writer; regular files ignore it.
const oNonblock = syscall.O_NONBLOCK
