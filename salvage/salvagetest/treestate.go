package salvagetest

import (
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// TreeState records every entry under root as one line of text: its
// mode, size and modification time and, for a regular file, the SHA-256
// of its content. It never follows a symbolic link and opens nothing but
// regular files, so a FIFO or device in the tree never blocks it. Two
// states are equal (maps.Equal) exactly when a read-only pass left the
// tree as it was.
func TreeState(root string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		s := fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			h := sha256.New()
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
			s += fmt.Sprintf(" %x", h.Sum(nil))
		}
		out[p] = s
		return nil
	})
	return out, err
}
