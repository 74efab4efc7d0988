//go:build !linux

package diskscan

import (
	"os"
)

// Longhorn's filesystem disks exist only on Linux. Elsewhere the package
// compiles, so hosts can build and unit-test their own code on a laptop,
// but every disk reports an error instead of a filesystem ID: scans never
// mark a disk Ready and Delete refuses every purge.

// FSID returns the filesystem ID of the filesystem holding path. On this
// platform it always fails.
func FSID(path string) (_ string, err error) {
	defer withPrefix(&err)
	return "", &os.PathError{Op: "statfs", Path: path, Err: errUnsupported}
}

func fsidOf(f *os.File) (string, error) {
	return "", &os.PathError{Op: "fstatfs", Path: f.Name(), Err: errUnsupported}
}

func allocatedBytes(fi os.FileInfo) int64 { return fi.Size() }

func identityOf(os.FileInfo) (dirIdentity, bool) { return dirIdentity{}, false }

func stampOf(os.FileInfo) (dirStamp, bool) { return dirStamp{}, false }

func dupFd(f *os.File) (uintptr, error) {
	return 0, &os.PathError{Op: "dup", Path: f.Name(), Err: errUnsupported}
}
