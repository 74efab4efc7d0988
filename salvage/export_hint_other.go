//go:build !(linux && (amd64 || arm64))

package salvage

import "os"

// exportWillNeed is a no-op where posix_fadvise is not wired up.
func exportWillNeed(*os.File, int64, int64) {}
