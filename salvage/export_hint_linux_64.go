//go:build linux && (amd64 || arm64)

package salvage

import (
	"os"
	"syscall"
)

// exportWillNeed asks the kernel to start reading [off, off+n) of f now
// (posix_fadvise POSIX_FADV_WILLNEED), so that the reads of a window's
// runs, spread over several layer files, are in flight together instead
// of one at a time. It is a hint: its error is ignored.
func exportWillNeed(f *os.File, off, n int64) {
	const posixFadvWillneed = 3
	syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), uintptr(off), uintptr(n), posixFadvWillneed, 0, 0)
}
