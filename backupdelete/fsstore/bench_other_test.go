//go:build !linux

package fsstore

import (
	"testing"
	"time"
)

// listingFloor is measured on Linux only (raw getdents64).
func listingFloor(*testing.B, string, int) (time.Duration, bool) { return 0, false }
