//go:build unix

package fsstore

import (
	"io/fs"
	"syscall"
)

func inode(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// syncFS writes dirty data back (benchmarks start each measurement from a
// clean page cache rather than during the writeback of their setup).
func syncFS() { syscall.Sync() }
