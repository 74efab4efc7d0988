package diskscan

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/caretaker-storage/caretaker/internal/lhreplica"
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

// Tombstones are what Delete renames a directory to before removing
// it: .caretaker-purge.<name>.<token>.del, where the token is 16 random
// lowercase hex digits drawn for each purge; its marker (see tombstone.go)
// is .caretaker-mark.<name>.<token>.mark. The prefixes make them
// recognisable and hidden (and only tombstones start with
// ".caretaker-purge."); the ".del" and ".mark" suffixes put
// a dot among the last eight characters, so neither ever matches
// Longhorn's replica name rule. The token makes every purge's names its
// own: a look-alike cannot be one of ours by accident, and a second purge
// of the same name never collides with an interrupted first one.
const (
	tombstonePrefix = ".caretaker-purge."
	tombstoneSuffix = ".del"
	markerPrefix    = ".caretaker-mark."
	markerSuffix    = ".mark"
	tokenLen        = 16
	nameMax         = 255 // NAME_MAX on Linux filesystems
)

// ValidDataName reports whether name is a replica data directory name by
// Longhorn's rule: a non-empty volume part, a dash, and eight ASCII letters
// or digits at the end (longhorn-manager scheduler/replica_scheduler.go,
// util.RandomID). A name that is unsafe as a path component is never
// valid. orphan.VolumeOfDataName returns the volume of such a name by the
// same rule.
func ValidDataName(name string) bool { return lhreplica.ValidDataName(name) }

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

// purge names one purge: the data directory and the purge's token.
type purge struct{ name, token string }

// tombstone is the purge's tombstone name.
func (p purge) tombstone() string {
	return tombstonePrefix + p.name + "." + p.token + tombstoneSuffix
}

// marker is the purge's marker file name.
func (p purge) marker() string { return markerPrefix + p.name + "." + p.token + markerSuffix }

// newPurge draws a token for purging name.
func newPurge(name string) (purge, error) {
	var b [tokenLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return purge{}, err
	}
	return purge{name: name, token: hex.EncodeToString(b[:])}, nil
}

// purgeable reports whether name's tombstone and marker fit in one path
// component. A directory whose names would not is never reported as an
// orphan: it cannot be purged safely.
func purgeable(name string) bool {
	extra := max(len(tombstonePrefix)+len(tombstoneSuffix), len(markerPrefix)+len(markerSuffix))
	return len(name)+1+tokenLen+extra <= nameMax
}

// looksLikeTombstone reports whether an entry has a tombstone's prefix and
// suffix: one of ours, or a look-alike (an older caretaker's, or anyone's).
func looksLikeTombstone(entry string) bool {
	return len(entry) >= len(tombstonePrefix)+len(tombstoneSuffix) &&
		strings.HasPrefix(entry, tombstonePrefix) && strings.HasSuffix(entry, tombstoneSuffix)
}

// parsePurgeEntry parses a tombstone or marker name. It returns the purge,
// whether the entry is a marker, and false if the entry is neither.
func parsePurgeEntry(entry string) (p purge, isMarker, ok bool) {
	var rest string
	if r, ok := strings.CutPrefix(entry, tombstonePrefix); ok {
		if rest, ok = strings.CutSuffix(r, tombstoneSuffix); !ok {
			return purge{}, false, false
		}
	} else if r, ok := strings.CutPrefix(entry, markerPrefix); ok {
		if rest, ok = strings.CutSuffix(r, markerSuffix); !ok {
			return purge{}, false, false
		}
		isMarker = true
	} else {
		return purge{}, false, false
	}
	dot := len(rest) - tokenLen - 1
	if dot < 1 || rest[dot] != '.' {
		return purge{}, false, false
	}
	for _, c := range []byte(rest[dot+1:]) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return purge{}, false, false
		}
	}
	p = purge{name: rest[:dot], token: rest[dot+1:]}
	if SafeName(p.name) != nil {
		return purge{}, false, false
	}
	return p, isMarker, true
}

func pathError(msg string) error { return &unsafePathError{msg} }

type unsafePathError struct{ msg string }

func (e *unsafePathError) Error() string { return ErrUnsafePath.Error() + ": " + e.msg }
func (e *unsafePathError) Unwrap() error { return ErrUnsafePath }

func quote(s string) string { return strconv.Quote(s) }
