package salvage

import (
	"errors"

	"github.com/caretaker-storage/caretaker/internal/lhreplica"
)

// The file names of a Longhorn v1 replica directory (longhorn-engine
// pkg/util/disk/constant.go and pkg/replica/replica.go).
const (
	VolumeMetaFile      = lhreplica.VolumeMetaFile
	RevisionCounterFile = lhreplica.RevisionCounterFile
	layerMetaSuffix     = lhreplica.LayerMetaSuffix
	revisionCounterSize = lhreplica.RevisionCounterSize
)

// ErrCorrupt is wrapped by every *MetaError: a meta file that is not what
// the engine writes. Both salvage and diskscan read the one replica
// format; ErrCorrupt is of the library's malformed-input class, so
// errors.Is matches it with diskscan.ErrCorrupt (and every other package's
// malformed sentinel) both ways.
var ErrCorrupt = lhreplica.ErrCorrupt

// MetaError says which meta file did not parse (File: volume.meta,
// <layer>.img.meta or revision.counter), and why (Detail). It wraps
// ErrCorrupt.
type MetaError = lhreplica.MetaError

// MetaFormat names the form of a volume.meta: the Longhorn releases that
// write exactly its keys (longhorn-engine pkg/replica/replica.go, type
// Info, across tags).
type MetaFormat = lhreplica.MetaFormat

// The forms volume.meta has had.
const (
	// FormatV010 is v0.1.0: Size, Head, Dirty, Rebuilding, Parent,
	// SectorSize.
	FormatV010 = lhreplica.FormatV010
	// FormatV020 is v0.2.0 to v1.0.2: BackingFileName added.
	FormatV020 = lhreplica.FormatV020
	// FormatV110 is v1.1.0: Error added.
	FormatV110 = lhreplica.FormatV110
	// FormatV111 is v1.1.1 to v1.11: BackingFileName renamed
	// BackingFilePath.
	FormatV111 = lhreplica.FormatV111
	// FormatV112 is v1.12 and newer: Encrypted added.
	FormatV112 = lhreplica.FormatV112
	// FormatOther is any other combination of keys the parser accepts.
	FormatOther = lhreplica.FormatOther
)

// VolumeMeta is a replica's volume.meta in any release's form. Keys a
// release does not write are zero; BackingFilePath holds the
// BackingFilePath key or the BackingFileName key it was renamed from, and
// Format says which keys the file had. It is the same type as
// diskscan.VolumeMeta.
type VolumeMeta = lhreplica.VolumeMeta

// ErrEmptyVolumeMeta is wrapped, with a *MetaError (and so ErrCorrupt),
// by ParseVolumeMeta's error for an empty volume.meta (nothing but white
// space, which the engine's decoder reads as no document): what a power
// loss leaves of it in releases that did not sync it before the rename.
//
// The engine, opened writable on such a directory, rewrites volume.meta,
// taking the size from its command line (the controller's volume size)
// and as head the first directory entry whose name contains volume-head
// (pkg/replica/replica.go tryRecoverVolumeMetaFile, checkValidVolumeMetaData);
// its read-only open fails. salvage deviates, on the safe side: it has no
// size to take, and the first head in name order is not always the
// newest (a snapshot cut while volume.meta was written leaves two), so it
// refuses the copy (ReasonVolumeMeta) and names the heads present; a
// person who writes volume.meta by hand (ReasonVolumeMeta's remedy) can
// then export it.
var ErrEmptyVolumeMeta = errors.New("salvage: volume.meta is empty")

// emptyMetaError is ParseVolumeMeta's error for an empty volume.meta: a
// *MetaError that is also ErrEmptyVolumeMeta.
type emptyMetaError struct{ *MetaError }

func (e emptyMetaError) Unwrap() []error { return []error{ErrEmptyVolumeMeta, e.MetaError} }

// ParseVolumeMeta parses a volume.meta of any release by the inspection's
// rule. The file must be in the replica format, read strictly (one JSON
// object, then only white space, with at least v0.1.0's keys, each of its
// type and not null; no key twice or matching a field only without regard
// to case; not both backing-file keys; Size and SectorSize not negative;
// Head "" or a plain file name). On top of the format, the inspection's
// policy: Size above 0 (with Size 0 an export reads nothing, so there is
// nothing to recover by the engine's rules) and a Head named (the chain
// starts there). diskscan's scan applies the same policy, so a directory
// it reports as a replica is never one whose metadata Inspect calls
// unrecoverable. Unknown keys are ignored. Errors are *MetaError wrapping
// ErrCorrupt; for an empty file the error is also ErrEmptyVolumeMeta.
func ParseVolumeMeta(data []byte) (VolumeMeta, error) {
	m, err := lhreplica.ParseVolumeMeta(data)
	if err != nil {
		var me *MetaError
		if lhreplica.IsEmptyDocument(data) && errors.As(err, &me) {
			return VolumeMeta{}, emptyMetaError{me}
		}
		return VolumeMeta{}, err
	}
	switch {
	case m.Size <= 0:
		return VolumeMeta{}, &MetaError{File: VolumeMetaFile, Detail: "Size 0: no volume size recorded"}
	case m.Head == "":
		return VolumeMeta{}, &MetaError{File: VolumeMetaFile, Detail: "no Head image named"}
	}
	return m, nil
}

// LayerMeta is a layer's <image>.meta (longhorn-engine
// pkg/replica/replica.go, type disk): Parent, Removed, UserCreated,
// Created (RFC 3339, as written) and Labels. v0.1.0 wrote only Parent,
// v0.2.0 Parent and Removed; the others came with v0.3.0. The engine
// ignores the Name key on read (readDiskData names the entry after the
// file), and so does ParseLayerMeta.
type LayerMeta = lhreplica.LayerMeta

// ParseLayerMeta parses a layer's .meta of any release: one JSON object
// with at least Parent, no key twice, each known key of its type, Parent
// "" or a plain file name. Errors are *MetaError wrapping ErrCorrupt,
// naming file.
func ParseLayerMeta(file string, data []byte) (LayerMeta, error) {
	return lhreplica.ParseLayerMeta(file, data)
}

// ParseRevisionCounter parses revision.counter: the counter in ASCII
// decimal, NUL-padded (longhorn-engine pkg/replica/revision_counter.go
// readRevisionCounter trims NULs at both ends and parses a base-10
// int64). A negative counter is refused. Errors are *MetaError.
func ParseRevisionCounter(data []byte) (int64, error) {
	return lhreplica.ParseRevisionCounter(data)
}

// plainName reports whether s names a file directly inside a directory
// (lhreplica.PlainName).
func plainName(s string) bool { return lhreplica.PlainName(s) }

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
