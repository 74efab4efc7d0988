//go:build !(linux && (amd64 || arm64))

package diskscan

import (
	"context"
	"os"
)

// validateBufs are a validation worker's buffers (none here).
type validateBufs struct{}

// validationFd returns -1: validations go through the os.Root.
func validationFd(*os.File) int { return -1 }

func closeValidationFd(int) {}

// validateAt never tells here: validate goes through rr.
func (o *Orphans) validateAt(context.Context, *os.Root, int, *validateBufs, *cachedEntry, string) (validation, bool) {
	return validation{}, false
}
