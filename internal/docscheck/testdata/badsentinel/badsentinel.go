// Package badsentinel is a fixture of TestPrefixCheckCatchesABadSentinel:
// sentinels with and without their package's prefix.
package badsentinel

import (
	"errors"

	"github.com/caretaker-storage/caretaker/internal/docscheck/testdata/badsentinel/other"
)

var (
	// ErrGood carries the package's prefix.
	ErrGood = errors.New("badsentinel: carries its prefix")
	// ErrBad lacks it: the check must name it.
	ErrBad = errors.New("no package prefix")
	// ErrNil was never set.
	ErrNil error
	// ErrShared takes package other's value: a class two packages share,
	// not checked here.
	ErrShared = other.ErrShared
	// ErrTwin and ErrTwinAgain are one value under two names of one
	// package: both are checked.
	ErrTwin      = errors.New("twin: no prefix either")
	ErrTwinAgain = ErrTwin
)
