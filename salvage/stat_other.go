//go:build !unix

package salvage

import "io/fs"

// allocated is the apparent size where block counts are unknown.
func allocated(fi fs.FileInfo) int64 { return fi.Size() }
