//go:build !linux

package diskscan

import (
	"io/fs"
	"os"
)

// Elsewhere nothing can prove a directory holds no mount point; the
// purge never gets this far anyway (FSID fails first).

func openDirNoBlock(parent *os.Root, name string) (*os.File, error) {
	return nil, &os.PathError{Op: "open", Path: name, Err: errUnsupported}
}

func rootOfDir(f *os.File) (*os.Root, error) {
	return nil, &os.PathError{Op: "open", Path: f.Name(), Err: errUnsupported}
}

func mountOf(f *os.File) (uint64, error) { return 0, errUnsupported }

func pathOf(f *os.File) (string, error) { return "", errUnsupported }

func mountPointsUnder(string, bool, string) ([]string, error) { return nil, errUnsupported }

func fileIdentity(fs.FileInfo) (fs.FileMode, uint64, uint64, bool) { return 0, 0, 0, false }
