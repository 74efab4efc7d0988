//go:build !linux

package diskscan

import "os"

// Elsewhere there is no host root to reach: Longhorn's disks are Linux's.

func hostRootSupported() error { return errUnsupported }

func (h hostTree) openRoot(path string) (*os.Root, error) {
	if h.root != "" {
		return nil, &os.PathError{Op: "open in host root", Path: path, Err: errUnsupported}
	}
	return os.OpenRoot(path)
}
