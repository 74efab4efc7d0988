//go:build linux

package fsstore

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// lstatAtReference is how the sweep looked at a name before lstatAt: open
// it O_PATH|O_NOFOLLOW (nothing opened for I/O, no symlink followed at
// the last component) and fstat the descriptor. lstatAt must give the
// same answer for every name.
func lstatAtReference(dirfd int, name string, st *syscall.Stat_t) error {
	for {
		fd, err := syscall.Openat(dirfd, name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		err = syscall.Fstat(fd, st)
		syscall.Close(fd)
		return err
	}
}

// lstatFixture is a directory with one entry of every kind a block's name
// can hold (and a subdirectory holding a block), open as a descriptor.
func lstatFixture(t testing.TB) int {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "file.blk"), []byte("x"), 0o644))
	must(os.Link(filepath.Join(dir, "file.blk"), filepath.Join(dir, "hardlink.blk")))
	must(os.Mkdir(filepath.Join(dir, "dir.blk"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "dir.blk", "inner.blk"), nil, 0o644))
	must(os.Symlink("file.blk", filepath.Join(dir, "symlink.blk")))
	must(os.Symlink("dir.blk", filepath.Join(dir, "dirlink.blk")))
	must(os.Symlink("nowhere", filepath.Join(dir, "dangling.blk")))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo.blk"), 0o644))
	if l, err := net.Listen("unix", filepath.Join(dir, "sock.blk")); err == nil {
		t.Cleanup(func() { l.Close() })
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	must(err)
	t.Cleanup(func() { syscall.Close(fd) })
	return fd
}

func checkLstatAt(t *testing.T, dirfd int, name string) {
	t.Helper()
	if strings.IndexByte(name, 0) >= 0 {
		return // not a name: never built from a listing
	}
	var got, want syscall.Stat_t
	gotErr := lstatAt(dirfd, &append([]byte(name), 0)[0], &got)
	wantErr := lstatAtReference(dirfd, name, &want)
	if gotErr != wantErr {
		t.Fatalf("%q: lstatAt error %v, reference %v", name, gotErr, wantErr)
	}
	if gotErr == nil && (got.Ino != want.Ino || got.Dev != want.Dev || got.Mode != want.Mode || got.Nlink != want.Nlink) {
		t.Fatalf("%q: lstatAt ino %d mode %o nlink %d, reference ino %d mode %o nlink %d", name, got.Ino, got.Mode, got.Nlink, want.Ino, want.Mode, want.Nlink)
	}
	if gotErr == nil {
		regular, err := regularAt(dirfd, &append([]byte(name), 0)[0])
		if err != nil || regular != (want.Mode&syscall.S_IFMT == syscall.S_IFREG) {
			t.Fatalf("%q: regularAt %v %v, mode %o", name, regular, err, want.Mode)
		}
	}
}

// TestLstatAtMatchesOPath: for every kind of entry (a FIFO, a socket, a
// symlink to a file, to a directory, dangling; a directory; a missing
// name; names through a directory or a symlinked one) fstatat with
// AT_SYMLINK_NOFOLLOW answers exactly as the O_PATH open and fstat did,
// and never opens a FIFO (the test would hang).
func TestLstatAtMatchesOPath(t *testing.T) {
	fd := lstatFixture(t)
	for _, name := range []string{
		"file.blk", "hardlink.blk", "dir.blk", "symlink.blk", "dirlink.blk", "dangling.blk",
		"fifo.blk", "sock.blk", "missing.blk", "dir.blk/inner.blk", "dirlink.blk/inner.blk",
		"file.blk/x", ".", "..", "", "/", "dir.blk/",
	} {
		checkLstatAt(t, fd, name)
	}
}

// FuzzLstatAt compares lstatAt with the O_PATH reference on any name in
// the fixture directory.
func FuzzLstatAt(f *testing.F) {
	for _, s := range []string{"file.blk", "fifo.blk", "symlink.blk", "dirlink.blk/inner.blk", "missing", "../", "dir.blk/../fifo.blk"} {
		f.Add(s)
	}
	fd := lstatFixture(f)
	f.Fuzz(func(t *testing.T, name string) {
		checkLstatAt(t, fd, name)
	})
}
