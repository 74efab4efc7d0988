//go:build !linux

package diskscan

import (
	"io/fs"
	"os"
)

// listNames appends the entries of dir to names and types (see the Linux
// version; scans never get this far elsewhere, as no disk is Ready).
func listNames(dir *os.File, _ *os.Root, _ int, names []string, types []fs.FileMode) ([]string, []fs.FileMode, error) {
	entries, err := listDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		names = append(names, e.Name())
		types = append(types, e.Type())
	}
	return names, types, nil
}

func entriesHint(dirStamp) int { return 0 }
