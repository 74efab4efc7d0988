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
