package lhreplica

import "strings"

// The file names of a Longhorn v1 replica directory (longhorn-engine
// pkg/util/disk/constant.go and pkg/replica/replica.go).
const (
	// VolumeMetaFile is the replica's volume.meta.
	VolumeMetaFile = "volume.meta"
	// RevisionCounterFile holds the revision counter when it is enabled.
	RevisionCounterFile = "revision.counter"
	// LayerMetaSuffix ends every layer's metadata file: <image>.meta.
	LayerMetaSuffix = ".meta"
	// RevisionCounterSize is the one block the engine writes the counter
	// in (pkg/replica/revision_counter.go writeRevisionCounter).
	RevisionCounterSize = 4096
)

// DataNameSuffixLen is the length of the random part longhorn-manager
// appends to a volume's name to name a replica's data directory:
// <volume>-<8 letters or digits> (scheduler/replica_scheduler.go,
// util.RandomID).
const DataNameSuffixLen = 8

// NameMax is the longest file name Linux filesystems take (NAME_MAX).
const NameMax = 255

// ValidDataName reports whether name is a replica data directory name by
// Longhorn's rule: a non-empty volume part, a dash, and eight ASCII letters
// or digits at the end. A name that is unsafe as one path component
// (empty, ".", "..", a slash or NUL, longer than NameMax) is never valid.
func ValidDataName(name string) bool {
	// "", "." and ".." are shorter than any valid name, and the suffix is
	// letters and digits, so only the volume part may hold a slash or NUL.
	if len(name) < DataNameSuffixLen+2 || len(name) > NameMax || name[len(name)-DataNameSuffixLen-1] != '-' {
		return false
	}
	for i := len(name) - DataNameSuffixLen; i < len(name); i++ {
		if !isAlnum(name[i]) {
			return false
		}
	}
	volume := name[:len(name)-DataNameSuffixLen-1]
	return strings.IndexByte(volume, '/') < 0 && strings.IndexByte(volume, 0) < 0
}

// VolumeOfDataName returns the volume a replica data directory is named
// after: name without its dash and 8 letters or digits. It returns "" for
// a name ValidDataName refuses: volume.meta does not name the volume, so
// such a directory's volume cannot be told.
func VolumeOfDataName(name string) string {
	if !ValidDataName(name) {
		return ""
	}
	return name[:len(name)-DataNameSuffixLen-1]
}

// PlainName reports whether s names a file directly inside a directory:
// not empty, not "." or "..", no slash or NUL, at most NameMax bytes. The
// engine joins the names in its meta files to the replica directory
// unchecked; a name that is not plain would lead elsewhere.
func PlainName(s string) bool {
	return s != "" && s != "." && s != ".." && len(s) <= NameMax && !strings.ContainsAny(s, "/\x00")
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
