package diskscan

import (
	"errors"
	"fmt"
)

// FormatFSID combines the two words of statfs's f_fsid as Longhorn does:
// each word is taken as an unsigned 32-bit value (no sign extension, so a
// negative word does not spill into the other), the first word becomes the
// high half, and the result is printed as at least 12 lowercase hex digits.
func FormatFSID(w0, w1 int32) string {
	return fmt.Sprintf("%012x", uint64(uint32(w0))<<32|uint64(uint32(w1)))
}

// dirIdentity is what tells that a directory changed between two scans:
// its inode (a directory replaced under the same name) and its change and
// modification times (an entry created, removed or renamed inside it, as
// the engine's volume.meta.tmp rename does).
type dirIdentity struct {
	dev, ino     uint64
	mtime, ctime int64
}

// dirStamp is what tells that the entries of a directory may have
// changed: creating, removing or renaming an entry sets its mtime and
// ctime, and usually moves its link count (subdirectories) or its size.
// The last two only help within one timestamp tick; RacyWindow covers the
// rest.
type dirStamp struct {
	dirIdentity
	nlink uint64
	size  int64
}

// errUnsupported: what Delete needs to prove a purge safe (filesystem
// IDs, device and inode numbers, mount IDs) is only available on Linux.
var errUnsupported = errors.New("diskscan: filesystem IDs, inodes and mounts are only available on Linux")
