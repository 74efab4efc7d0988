//go:build !unix

package fsstore

import "io/fs"

// inode is unknown off unix; tests then tell file versions apart by time.
func inode(fs.FileInfo) uint64 { return 0 }

// syncFS is a no-op off unix.
func syncFS() {}
