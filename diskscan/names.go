package diskscan

import (
	"strconv"
	"strings"
)

// Names of things on a Longhorn v1 filesystem disk.
const (
	// ConfigFile is the disk's config, directly under the disk path.
	ConfigFile = "longhorn-disk.cfg"
	// ReplicasDir holds one directory per replica, under the disk path.
	ReplicasDir = "replicas"
	// MetaFile is a replica's metadata, inside its directory. The engine
	// writes MetaFile+".tmp" and renames it over MetaFile.
	MetaFile = "volume.meta"
	// DiskType is the value of the DiskType parameter of replica data items.
	DiskType = "filesystem"
)

// suffixLen is the length of the random part Longhorn appends to a replica
// name to make its data directory name: <volume>-<8 alphanumerics>.
const suffixLen = 8

// Tombstones are what the Deleter renames a directory to before removing
// it. The ".caretaker-purge." prefix makes them recognisable and hidden;
// the ".del" suffix puts a dot among the last eight characters, so a
// tombstone never matches Longhorn's replica name rule.
const (
	tombstonePrefix = ".caretaker-purge."
	tombstoneSuffix = ".del"
	nameMax         = 255 // NAME_MAX on Linux filesystems
)

// ValidDataName reports whether name is a replica data directory name by
// Longhorn's rule: a non-empty volume part, a dash, and eight ASCII letters
// or digits at the end. A name that is unsafe as a path component is never
// valid.
func ValidDataName(name string) bool {
	if SafeName(name) != nil || len(name) < suffixLen+2 {
		return false
	}
	if name[len(name)-suffixLen-1] != '-' {
		return false
	}
	for i := len(name) - suffixLen; i < len(name); i++ {
		if !isAlnum(name[i]) {
			return false
		}
	}
	return true
}

// SafeName returns an error wrapping ErrUnsafePath if name cannot be used
// as one path component: empty, ".", "..", or containing '/' or NUL.
func SafeName(name string) error {
	switch {
	case name == "":
		return pathError("empty name")
	case name == "." || name == "..":
		return pathError("name " + quote(name) + " is a directory reference")
	case strings.ContainsAny(name, "/\x00"):
		return pathError("name " + quote(name) + " contains a slash or NUL")
	case len(name) > nameMax:
		return pathError("name is longer than 255 bytes")
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// tombstoneName returns the tombstone for a data directory name, or false
// if it would be too long for one path component.
func tombstoneName(name string) (string, bool) {
	t := tombstonePrefix + name + tombstoneSuffix
	return t, len(t) <= nameMax
}

// tombstoneOf returns the original name of a tombstone, or false if name is
// not one.
func tombstoneOf(name string) (string, bool) {
	if !strings.HasPrefix(name, tombstonePrefix) || !strings.HasSuffix(name, tombstoneSuffix) ||
		len(name) < len(tombstonePrefix)+len(tombstoneSuffix) {
		return "", false
	}
	return name[len(tombstonePrefix) : len(name)-len(tombstoneSuffix)], true
}

func pathError(msg string) error { return &unsafePathError{msg} }

type unsafePathError struct{ msg string }

func (e *unsafePathError) Error() string { return ErrUnsafePath.Error() + ": " + e.msg }
func (e *unsafePathError) Unwrap() error { return ErrUnsafePath }

func quote(s string) string { return strconv.Quote(s) }
