//go:build !linux

package salvage

import (
	"errors"
	"os"
)

// errNoDataUnknown says the platform cannot prove a file holds no data.
var errNoDataUnknown = errors.New("salvage: cannot prove a file holds no data on this platform")

// fileHasNoData cannot prove a file with no blocks allocated holds no
// data where lseek's SEEK_DATA is not Linux's: such a file is taken as
// holding data.
func fileHasNoData(*os.File) (bool, error) { return false, errNoDataUnknown }
