//go:build unix

package safefile

import "syscall"

// oNonblock makes opening a FIFO return at once instead of waiting for a
// writer; on a regular file it changes nothing.
const oNonblock = syscall.O_NONBLOCK
