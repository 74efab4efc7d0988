//go:build linux

package diskscan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"syscall"
	"unsafe"
)

// listNames appends the entries of dir (opened by openListing inside rr),
// without "." and "..", to names and types, unsorted, with the types the
// kernel's getdents64 reports. It parses the records itself: os.ReadDir
// allocates an entry per name, which on a disk of 100k replicas costs
// about half as much as the system calls, and the names are cut from one
// string. An entry whose type the filesystem does not report is lstat'ed
// inside rr (never followed); one gone meanwhile is left out.
//
// hint is how many entries to expect (see entriesHint); it only sizes
// buffers.
func listNames(dir *os.File, rr *os.Root, hint int, names []string, types []fs.FileMode) ([]string, []fs.FileMode, error) {
	rc, err := dir.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	buf := make([]byte, 128<<10)
	arena := make([]byte, 0, hint*24)
	ends := make([]int, 0, hint)
	names = slices.Grow(names, hint)
	types = slices.Grow(types, hint)
	for {
		var n int
		var errno error
		if err := rc.Read(func(fd uintptr) bool {
			for {
				n, errno = syscall.Getdents(int(fd), buf)
				if errno != syscall.EINTR {
					return true
				}
			}
		}); err != nil {
			return nil, nil, err
		}
		if errno != nil {
			return nil, nil, &os.PathError{Op: "getdents", Path: dir.Name(), Err: errno}
		}
		if n <= 0 {
			break
		}
		for off := 0; off < n; {
			const header = 19 // ino 8, off 8, reclen 2, type 1
			if off+header > n {
				return nil, nil, fmt.Errorf("getdents %s: truncated record", dir.Name())
			}
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen <= header || off+reclen > n {
				return nil, nil, fmt.Errorf("getdents %s: bad record length %d", dir.Name(), reclen)
			}
			typ := buf[off+18]
			name := buf[off+header : off+reclen]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			off += reclen
			if len(name) == 0 || string(name) == "." || string(name) == ".." {
				continue
			}
			arena = append(arena, name...)
			ends = append(ends, len(arena))
			types = append(types, direntType(typ))
		}
	}
	// The names share the arena's bytes, as strings.Builder's String
	// does: nothing writes to arena after this line.
	all := unsafe.String(unsafe.SliceData(arena), len(arena))
	start := 0
	for _, end := range ends {
		names = append(names, all[start:end])
		start = end
	}
	// Entries of unknown type: ask the filesystem, without following.
	kept := 0
	for i := range names {
		if types[i] == typeUnknown {
			fi, err := rr.Lstat(names[i])
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			types[i] = fi.Mode().Type()
		}
		names[kept], types[kept] = names[i], types[i]
		kept++
	}
	return names[:kept], types[:kept], nil
}

// typeUnknown marks an entry whose type getdents64 did not report.
const typeUnknown = fs.ModeIrregular | fs.ModeTemporary

// direntType maps a getdents64 d_type to a file mode's type bits.
func direntType(t byte) fs.FileMode {
	switch t {
	case syscall.DT_DIR:
		return fs.ModeDir
	case syscall.DT_REG:
		return 0
	case syscall.DT_LNK:
		return fs.ModeSymlink
	case syscall.DT_FIFO:
		return fs.ModeNamedPipe
	case syscall.DT_SOCK:
		return fs.ModeSocket
	case syscall.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case syscall.DT_BLK:
		return fs.ModeDevice
	case syscall.DT_UNKNOWN:
		return typeUnknown
	}
	return fs.ModeIrregular
}

// entriesHint guesses how many entries a directory with stamp st holds,
// to size the listing's buffers: a directory's link count is 2 plus its
// subdirectories (ext4 stops counting at 65000), and its size grows by
// about 20 to 40 bytes per entry on the usual filesystems. It is at most
// 1<<18, so a bogus size costs a few megabytes at worst; a larger
// directory grows its buffers as it is read.
func entriesHint(st dirStamp) int {
	return int(min(max(st.nlink, uint64(max(st.size, 0))/32), 1<<18))
}
