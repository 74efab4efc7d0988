package salvage

import (
	"errors"
	"os"
	"syscall"
)

// fileHasNoData reports whether lseek(SEEK_DATA) from offset 0 finds no
// data in f (ENXIO). A filesystem that does not implement SEEK_DATA
// reports the whole file as data (lseek(2)), so it is never taken for an
// empty one.
func fileHasNoData(f *os.File) (bool, error) {
	_, err := syscall.Seek(int(f.Fd()), 0, exportSeekData)
	switch {
	case errors.Is(err, syscall.ENXIO):
		return true, nil
	case err != nil:
		return false, err
	}
	return false, nil
}
