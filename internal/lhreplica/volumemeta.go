package lhreplica

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// MetaFormat names the form of a volume.meta: the Longhorn releases that
// write exactly its keys (longhorn-engine pkg/replica/replica.go, type
// Info, across tags).
type MetaFormat string

// The forms volume.meta has had.
const (
	// FormatV010 is v0.1.0: Size, Head, Dirty, Rebuilding, Parent,
	// SectorSize.
	FormatV010 MetaFormat = "v0.1.0"
	// FormatV020 is v0.2.0 to v1.0.2: BackingFileName added.
	FormatV020 MetaFormat = "v0.2.0-v1.0.2"
	// FormatV110 is v1.1.0: Error added.
	FormatV110 MetaFormat = "v1.1.0"
	// FormatV111 is v1.1.1 to v1.11: BackingFileName renamed
	// BackingFilePath.
	FormatV111 MetaFormat = "v1.1.1-v1.11"
	// FormatV112 is v1.12 and newer: Encrypted added.
	FormatV112 MetaFormat = "v1.12+"
	// FormatOther is any other combination of keys the parser accepts.
	FormatOther MetaFormat = "other"
)

// VolumeMeta is a replica's volume.meta in any release's form: the JSON
// of longhorn-engine's replica Info, one object whose keys are its
// exported fields. Which keys a file has depends on the release that
// wrote it:
//
//	v0.1.0            Size Head Dirty Rebuilding Parent SectorSize
//	v0.2.0 – v1.0.2   ... SectorSize BackingFileName
//	v1.1.0            ... Error ... BackingFileName (Error added)
//	v1.1.1 – v1.11.x  ... Error ... BackingFilePath (renamed from BackingFileName)
//	v1.12.0 and later ... BackingFilePath Encrypted
//
// A key the release did not write reads as its zero value; Format says
// which keys the file had.
type VolumeMeta struct {
	Size       int64  // the volume's size in bytes (the export length)
	Head       string // the head image's file name; "" or a plain name
	Dirty      bool   // the replica was open (not closed cleanly)
	Rebuilding bool   // a rebuild into this replica had not finished
	Error      string // v1.1.0+: the replica was in error state
	Parent     string // the head's parent, informational
	SectorSize int64
	// BackingFilePath is the backing file as the engine was given it:
	// the BackingFilePath key (v1.1.1+) or the BackingFileName key it
	// was renamed from (v0.2.0 to v1.1.0); Format tells which.
	BackingFilePath string
	Encrypted       bool       // v1.12+: the image holds LUKS2 ciphertext
	Format          MetaFormat `json:"-"`
}

// The keys of volume.meta by index: the ones every release writes (v0.1.0's
// Info) first, then the ones only some write.
const (
	fSize = iota
	fHead
	fDirty
	fRebuilding
	fParent
	fSectorSize
	fError
	fBackingFilePath
	fBackingFileName
	fEncrypted
	metaRequired = 1<<fError - 1 // the keys every release writes
)

var metaFields = [...]string{
	fSize: "Size", fHead: "Head", fDirty: "Dirty", fRebuilding: "Rebuilding", fParent: "Parent",
	fSectorSize: "SectorSize", fError: "Error", fBackingFilePath: "BackingFilePath",
	fBackingFileName: "BackingFileName", fEncrypted: "Encrypted",
}

// ParseVolumeMeta parses a volume.meta of any engine release. The format,
// and so every rule it checks:
//
//   - one JSON object, then only white space;
//   - every key of v0.1.0's Info present (Size, Head, Dirty, Rebuilding,
//     Parent, SectorSize); Error, BackingFileName, BackingFilePath and
//     Encrypted optional; other keys ignored;
//   - no key twice, and no key that names one of those only without
//     regard to case (encoding/json, the engine's decoder, fills a field
//     from such a key, the last one winning): the engine and a careful
//     reader would read such a file differently;
//   - every known key's value of the field's type, not null;
//   - not both BackingFileName and BackingFilePath (no release writes
//     both, and they would name two backing files);
//   - Size and SectorSize not negative;
//   - Head "" (the engine's read-only open leaves it so when volume.meta
//     is missing, tryRecoverVolumeMetaFile) or a plain file name
//     (PlainName): the engine joins it to the directory unchecked.
//
// Size 0 and Head "" are the format's: whether such a replica counts is
// the caller's policy. Errors are *MetaError wrapping ErrCorrupt.
func ParseVolumeMeta(data []byte) (VolumeMeta, error) {
	// Nearly every file is the engine's own, which parseMetaFast reads in
	// one pass; it declines anything it is not sure the reference would
	// read exactly so, and then the reference decides.
	if m, ok := parseMetaFast(data); ok {
		return m, nil
	}
	return parseVolumeMetaRef(data)
}

// IsEmptyDocument reports whether data holds nothing but JSON white space:
// what the engine's decoder reads as no document at all (io.EOF), which
// its open treats as a missing volume.meta (checkValidVolumeMetaData).
func IsEmptyDocument(data []byte) bool {
	return len(bytes.Trim(data, " \t\r\n")) == 0
}

// parseVolumeMetaRef is ParseVolumeMeta through encoding/json, rule by
// rule: the reference the fast path is compared with, and the parse of
// every input the fast path declines.
func parseVolumeMetaRef(data []byte) (VolumeMeta, error) {
	if IsEmptyDocument(data) {
		return VolumeMeta{}, corrupt(VolumeMetaFile, "empty: it records no size and no head; longhorn-engine's writable open rewrites it with the size it was started with and, as head, the first volume-head file in name order (pkg/replica/replica.go tryRecoverVolumeMetaFile), and its read-only open fails")
	}
	raw, err := decodeObject(data)
	if err != nil {
		return VolumeMeta{}, corrupt(VolumeMetaFile, "%v", err)
	}
	var m VolumeMeta
	dst := [...]any{
		fSize: &m.Size, fHead: &m.Head, fDirty: &m.Dirty, fRebuilding: &m.Rebuilding, fParent: &m.Parent,
		fSectorSize: &m.SectorSize, fError: &m.Error, fBackingFilePath: &m.BackingFilePath,
		fBackingFileName: &m.BackingFilePath, fEncrypted: &m.Encrypted,
	}
	var seen uint16
	for _, kv := range raw {
		field := -1
		for i, f := range metaFields {
			if kv.key == f {
				field = i
				break
			}
			if strings.EqualFold(kv.key, f) {
				return VolumeMeta{}, corrupt(VolumeMetaFile, "key %q is %q but for case", kv.key, f)
			}
		}
		if field < 0 {
			continue // a key of no release: ignored, as the engine does
		}
		seen |= 1 << field
		if err := decodeValue(kv.value, dst[field], false); err != nil {
			return VolumeMeta{}, corrupt(VolumeMetaFile, "key %q: %v", kv.key, err)
		}
	}
	for i, f := range metaFields[:fError] {
		if seen&(1<<i) == 0 {
			return VolumeMeta{}, corrupt(VolumeMetaFile, "missing key %q", f)
		}
	}
	if seen&(1<<fBackingFileName) != 0 && seen&(1<<fBackingFilePath) != 0 {
		return VolumeMeta{}, corrupt(VolumeMetaFile, "both BackingFileName and BackingFilePath")
	}
	if m.Size < 0 || m.SectorSize < 0 {
		return VolumeMeta{}, corrupt(VolumeMetaFile, "negative Size %d or SectorSize %d", m.Size, m.SectorSize)
	}
	if m.Head != "" && !PlainName(m.Head) {
		return VolumeMeta{}, corrupt(VolumeMetaFile, "Head %q is not a file name in the directory", m.Head)
	}
	m.Format = formatOf(seen)
	return m, nil
}

// formatOf names the form of a volume.meta that had the keys in seen.
func formatOf(seen uint16) MetaFormat {
	has := func(f int) bool { return seen&(1<<f) != 0 }
	switch name, errKey, path, enc := has(fBackingFileName), has(fError), has(fBackingFilePath), has(fEncrypted); {
	case !name && !errKey && !path && !enc:
		return FormatV010
	case name && !errKey && !enc:
		return FormatV020
	case name && errKey && !enc:
		return FormatV110
	case path && errKey && !enc:
		return FormatV111
	case path && errKey && enc:
		return FormatV112
	}
	return FormatOther
}

// keyValue is one member of a JSON object.
type keyValue struct {
	key   string
	value json.RawMessage
}

// decodeObject decodes exactly one JSON object (then only white space)
// into its members in order; a key twice is refused (the engine's decoder
// would take the last, a reader could take the first).
func decodeObject(data []byte) ([]keyValue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not a JSON object")
	}
	var kvs []keyValue
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("not JSON: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("not a JSON object")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("not JSON: %v", err)
		}
		if seen[key] {
			return nil, fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		kvs = append(kvs, keyValue{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the JSON object")
	}
	return kvs, nil
}

// decodeValue decodes one value into dst; null is refused unless
// nullOK (the engine never writes null for these keys, except a layer's
// Labels, where it means none).
func decodeValue(v json.RawMessage, dst any, nullOK bool) error {
	if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		if nullOK {
			return nil
		}
		return fmt.Errorf("null")
	}
	return json.Unmarshal(v, dst)
}
