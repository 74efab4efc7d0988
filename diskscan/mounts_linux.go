//go:build linux

package diskscan

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// The mount table and the mount of an open file come from procfs. Without
// /proc, nothing can prove a directory holds no mount point, so purges are
// refused.
const (
	// maxMountInfoSize bounds the mount table read. A node with thousands
	// of pods has a few megabytes; a larger table is refused, not cut.
	maxMountInfoSize = 64 << 20
	// maxFdInfoSize bounds a /proc/self/fdinfo read (a few lines).
	maxFdInfoSize = 64 << 10
)

// openDirNoBlock opens the directory name inside parent without ever
// blocking: O_DIRECTORY makes anything but a directory fail at once (a
// FIFO swapped in after the lstat cannot hold the open), O_NONBLOCK too.
func openDirNoBlock(parent *os.Root, name string) (*os.File, error) {
	return parent.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
}

// rootOfDir returns an os.Root of the very directory f holds, reopened
// through procfs (the magic link names the open file, not its path, so a
// directory renamed or replaced meanwhile cannot take its place).
func rootOfDir(f *os.File) (*os.Root, error) {
	return os.OpenRoot("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
}

// mountOf returns the ID of the mount an open file is on (mnt_id in
// /proc/self/fdinfo). A bind mount of the same filesystem has the same
// st_dev as its parent but its own mount ID.
func mountOf(f *os.File) (uint64, error) {
	id, err := mountOfFd(int(f.Fd()))
	if err != nil {
		return 0, fmt.Errorf("fdinfo of %s: %w", f.Name(), err)
	}
	return id, nil
}

// mountOfFd is mountOf for a raw descriptor.
func mountOfFd(fd int) (uint64, error) {
	data, err := readProcFile("/proc/self/fdinfo/"+strconv.Itoa(fd), maxFdInfoSize)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "mnt_id:"); ok {
			id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("bad mnt_id %q", v)
			}
			return id, nil
		}
	}
	return 0, errors.New("no mnt_id")
}

// pathOf returns the path of an open directory as the kernel knows it
// (relative to this process's root, as the mount table is).
func pathOf(f *os.File) (string, error) {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, " (deleted)") {
		return "", fmt.Errorf("%s has no usable path (%q)", f.Name(), p)
	}
	return p, nil
}

// mountPointsUnder returns the mount points of the mount table at table
// that are dir itself or below it. With fallback, a table that does not
// exist is replaced by /proc/self/mountinfo (a kernel without
// /proc/thread-self).
func mountPointsUnder(table string, fallback bool, dir string) ([]string, error) {
	data, err := readProcFile(table, maxMountInfoSize)
	if fallback && errors.Is(err, fs.ErrNotExist) {
		data, err = readProcFile(ownMountInfoFallback, maxMountInfoSize)
	}
	if err != nil {
		return nil, err
	}
	points, err := parseMountInfo(data)
	if err != nil {
		return nil, err
	}
	var under []string
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for _, p := range points {
		if p == dir || strings.HasPrefix(p, prefix) {
			under = append(under, p)
		}
	}
	return under, nil
}

// readProcFile reads a procfs file of at most limit bytes.
func readProcFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := readBounded(f, path, limit)
	if err != nil {
		return nil, err
	}
	return data, nil
}

// fileIdentity returns what tells two directory entries apart: type,
// device and inode. os.SameFile compares device and inode only, and a
// directory removed and replaced by a symbolic link can get its inode.
func fileIdentity(fi fs.FileInfo) (typ fs.FileMode, dev, ino uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, 0, false
	}
	return fi.Mode().Type(), uint64(st.Dev), st.Ino, true
}
