//go:build linux

package diskscan

import (
	"os"
	"syscall"
)

// FSID returns the filesystem ID of the filesystem holding path, exactly as
// Longhorn computes a filesystem disk's ID (GetDiskStat in
// longhorn/go-common-libs): statfs(2), the two 32-bit words of f_fsid
// combined into one 64-bit value, first word high, printed as %012x. It
// equals the output of `stat -f -c %i path` whenever that has 12 digits
// or more.
func FSID(path string) (_ string, err error) {
	defer withPrefix(&err)
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return "", &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	return FormatFSID(st.Fsid.X__val[0], st.Fsid.X__val[1]), nil
}

// fsidOf returns the filesystem ID of an open file or directory.
func fsidOf(f *os.File) (string, error) {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &st); err != nil {
		return "", &os.PathError{Op: "fstatfs", Path: f.Name(), Err: err}
	}
	return FormatFSID(st.Fsid.X__val[0], st.Fsid.X__val[1]), nil
}

// allocatedBytes returns the bytes a file occupies on disk: st_blocks is in
// 512-byte units whatever the filesystem's block size, and a sparse file's
// holes have no blocks.
func allocatedBytes(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

func identityOf(fi os.FileInfo) (dirIdentity, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return dirIdentity{}, false
	}
	return dirIdentity{
		dev:   uint64(st.Dev),
		ino:   st.Ino,
		mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec,
		ctime: st.Ctim.Sec*1e9 + st.Ctim.Nsec,
	}, true
}

// stampOf returns the stamp of a directory's FileInfo.
func stampOf(fi os.FileInfo) (dirStamp, bool) {
	id, ok := identityOf(fi)
	if !ok {
		return dirStamp{}, false
	}
	st := fi.Sys().(*syscall.Stat_t)
	return dirStamp{dirIdentity: id, nlink: uint64(st.Nlink), size: st.Size}, true
}

// dupFd duplicates f's descriptor, close-on-exec.
func dupFd(f *os.File) (uintptr, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var fd int
	var dupErr error
	if err := rc.Control(func(old uintptr) {
		fd, dupErr = syscall.Dup(int(old))
		if dupErr == nil {
			syscall.CloseOnExec(fd)
		}
	}); err != nil {
		return 0, err
	}
	if dupErr != nil {
		return 0, &os.PathError{Op: "dup", Path: f.Name(), Err: dupErr}
	}
	return uintptr(fd), nil
}
