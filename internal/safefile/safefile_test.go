//go:build unix

package safefile_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/internal/safefile"
)

// TestOpenRegularRefusesWhatIsNotAFile puts a FIFO, a socket, a symbolic
// link and a directory where a file is expected; none may block or be
// read through, and each is a *TypeError naming its type.
func TestOpenRegularRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "target"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Symlink("target", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for name, want := range map[string]string{"fifo": "a FIFO", "sock": "a socket", "link": "a symbolic link", "dir": "a directory"} {
		for _, opener := range []struct {
			what string
			dir  safefile.Opener
			name string
		}{{"root", root, name}, {"path", safefile.Dir{}, filepath.Join(dir, name)}} {
			if name == "link" && opener.what == "path" {
				continue // Dir follows a link a user named: checked below
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // a hang guard, not timing logic
			done := make(chan error, 1)
			go func() {
				f, _, err := safefile.OpenRegular(opener.dir, opener.name)
				if f != nil {
					f.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				var te *safefile.TypeError
				if !errors.As(err, &te) || !errors.Is(err, safefile.ErrNotRegular) || safefile.Describe(te.Mode) != want {
					t.Errorf("%s via %s: err = %v, want a TypeError for %s", name, opener.what, err, want)
				}
			case <-ctx.Done():
				t.Fatalf("%s via %s: OpenRegular blocked", name, opener.what)
			}
			cancel()
		}
	}
	f, _, err := safefile.OpenRegular(safefile.Dir{}, filepath.Join(dir, "link"))
	if err != nil {
		t.Fatalf("Dir refuses a link to a regular file: %v", err)
	}
	f.Close()
	f, info, err := safefile.OpenRegular(root, "target")
	if err != nil || !info.Mode().IsRegular() {
		t.Fatalf("regular file: %v, %v", info, err)
	}
	f.Close()
	if _, _, err := safefile.OpenRegular(root, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v, want fs.ErrNotExist", err)
	}
}

// swapper replaces the file between the type check and the open.
type swapper struct {
	safefile.Dir
	swap func()
}

func (s swapper) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	s.swap()
	return s.Dir.OpenFile(name, flag, perm)
}

// TestOpenRegularNoticesASwap: a FIFO or another file put in place after
// Lstat is refused, and the FIFO open does not block.
func TestOpenRegularNoticesASwap(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		dir := t.TempDir()
		p := filepath.Join(dir, "volume.meta")
		if err := os.WriteFile(p, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		// The replacement is made while the original still exists, so it
		// cannot get the original's inode number back.
		s := swapper{swap: func() {
			tmp := p + ".new"
			var err error
			if fifo {
				err = syscall.Mkfifo(tmp, 0o600)
			} else {
				err = os.WriteFile(tmp, []byte("{}"), 0o600)
			}
			if err == nil {
				err = os.Rename(tmp, p)
			}
			if err != nil {
				t.Error(err)
			}
		}}
		_, _, err := safefile.OpenRegular(s, p)
		var te *safefile.TypeError
		if !errors.As(err, &te) || !te.Swapped {
			t.Fatalf("fifo=%v: err = %v, want a swapped TypeError", fifo, err)
		}
	}
}
