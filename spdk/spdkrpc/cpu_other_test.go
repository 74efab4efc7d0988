//go:build !unix

package spdkrpc_test

import (
	"testing"
	"time"
)

// processCPU is not measured off Unix: the CPU metrics read 0 (NaN for
// the ratio).
func processCPU(*testing.B) time.Duration { return 0 }
