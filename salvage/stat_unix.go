//go:build unix

package salvage

import (
	"io/fs"
	"syscall"
)

// allocated is the bytes a file has on disk (st_blocks × 512, as
// longhorn-engine util.GetFileActualSize counts them).
func allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}
