package salvage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// The file names of a Longhorn v1 replica directory (longhorn-engine
// pkg/util/disk/constant.go and pkg/replica/replica.go).
const (
	VolumeMetaFile      = "volume.meta"
	RevisionCounterFile = "revision.counter"
	layerMetaSuffix     = ".meta"
	// revisionCounterSize is the one 4096-byte block the engine writes the
	// counter in (pkg/replica/revision_counter.go writeRevisionCounter).
	revisionCounterSize = 4096
)

// ErrCorrupt is wrapped by every *MetaError: a meta file that is not what
// the engine writes.
var ErrCorrupt = errors.New("corrupt replica metadata")

// MetaError says which meta file did not parse, and why.
type MetaError struct {
	File   string // volume.meta, <layer>.img.meta or revision.counter
	Detail string
}

func (e *MetaError) Error() string { return e.File + ": " + e.Detail }

// Unwrap returns ErrCorrupt.
func (e *MetaError) Unwrap() error { return ErrCorrupt }

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

// VolumeMeta is a replica's volume.meta in any release's form. Keys a
// release does not write are zero.
type VolumeMeta struct {
	Size       int64  // the volume's size in bytes
	Head       string // the head image's file name
	Dirty      bool   // the replica was open (not closed cleanly)
	Rebuilding bool   // a rebuild into this replica had not finished
	Error      string // v1.1.0+: the replica was in error state
	Parent     string // the head's parent, informational
	SectorSize int64
	// BackingFilePath is the backing image as the engine was given it
	// (v1.1.1+), or BackingFileName (v0.2.0 to v1.1.0).
	BackingFilePath string
	Encrypted       bool       // v1.12+: the image holds LUKS2 ciphertext
	Format          MetaFormat `json:"-"`
}

// volumeMetaRequired are the keys every release writes (v0.1.0's set).
var volumeMetaRequired = [...]string{"Size", "Head", "Dirty", "Rebuilding", "Parent", "SectorSize"}

// ParseVolumeMeta parses a volume.meta of any release: one JSON object
// (then only white space) with at least v0.1.0's keys, each of its type,
// Size positive and Head a plain file name. Unknown keys are ignored.
// Errors are *MetaError wrapping ErrCorrupt.
func ParseVolumeMeta(data []byte) (VolumeMeta, error) {
	bad := func(format string, args ...any) (VolumeMeta, error) {
		return VolumeMeta{}, &MetaError{File: VolumeMetaFile, Detail: fmt.Sprintf(format, args...)}
	}
	raw, err := decodeObject(data)
	if err != nil {
		return bad("%v", err)
	}
	for _, k := range volumeMetaRequired {
		if _, ok := raw[k]; !ok {
			return bad("missing key %q", k)
		}
	}
	var m VolumeMeta
	fields := []struct {
		key string
		dst any
	}{
		{"Size", &m.Size}, {"Head", &m.Head}, {"Dirty", &m.Dirty}, {"Rebuilding", &m.Rebuilding},
		{"Error", &m.Error}, {"Parent", &m.Parent}, {"SectorSize", &m.SectorSize},
		{"BackingFileName", &m.BackingFilePath}, {"BackingFilePath", &m.BackingFilePath}, {"Encrypted", &m.Encrypted},
	}
	for _, f := range fields {
		v, ok := raw[f.key]
		if !ok {
			continue
		}
		if err := decodeValue(v, f.dst); err != nil {
			return bad("key %q: %v", f.key, err)
		}
	}
	if _, name := raw["BackingFileName"]; name {
		if _, path := raw["BackingFilePath"]; path {
			return bad("both BackingFileName and BackingFilePath")
		}
	}
	if m.Size <= 0 || m.SectorSize < 0 {
		return bad("Size %d, SectorSize %d", m.Size, m.SectorSize)
	}
	if !plainName(m.Head) {
		return bad("Head %q is not a file name in the directory", m.Head)
	}
	m.Format = formatOf(raw)
	return m, nil
}

func formatOf(raw map[string]json.RawMessage) MetaFormat {
	has := func(k string) bool { _, ok := raw[k]; return ok }
	switch name, errKey, path, enc := has("BackingFileName"), has("Error"), has("BackingFilePath"), has("Encrypted"); {
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

// LayerMeta is a layer's <image>.meta (longhorn-engine
// pkg/replica/replica.go, type disk). v0.1.0 wrote only Parent, v0.2.0
// Parent and Removed; the others came with v0.3.0. The engine ignores the
// Name key on read (readDiskData names the entry after the file), and so
// does ParseLayerMeta.
type LayerMeta struct {
	Parent      string
	Removed     bool
	UserCreated bool
	Created     string // RFC 3339, as written; "" when absent
	Labels      map[string]string
}

// ParseLayerMeta parses a layer's .meta of any release: one JSON object
// with at least Parent, each known key of its type, Parent "" or a plain
// file name. Errors are *MetaError wrapping ErrCorrupt, naming file.
func ParseLayerMeta(file string, data []byte) (LayerMeta, error) {
	bad := func(format string, args ...any) (LayerMeta, error) {
		return LayerMeta{}, &MetaError{File: file, Detail: fmt.Sprintf(format, args...)}
	}
	raw, err := decodeObject(data)
	if err != nil {
		return bad("%v", err)
	}
	if _, ok := raw["Parent"]; !ok {
		return bad("missing key %q", "Parent")
	}
	var m LayerMeta
	for _, f := range []struct {
		key string
		dst any
	}{{"Parent", &m.Parent}, {"Removed", &m.Removed}, {"UserCreated", &m.UserCreated}, {"Created", &m.Created}, {"Labels", &m.Labels}} {
		v, ok := raw[f.key]
		if !ok {
			continue
		}
		if err := decodeValue(v, f.dst); err != nil {
			return bad("key %q: %v", f.key, err)
		}
	}
	if m.Parent != "" && !plainName(m.Parent) {
		return bad("Parent %q is not a file name in the directory", m.Parent)
	}
	return m, nil
}

// CreatedTime is Created parsed, or the zero time if absent or not RFC
// 3339.
func (m LayerMeta) CreatedTime() time.Time {
	t, err := time.Parse(time.RFC3339, m.Created)
	if err != nil {
		return time.Time{}
	}
	return t
}

// ParseRevisionCounter parses revision.counter: the counter in ASCII
// decimal, NUL-padded (longhorn-engine pkg/replica/revision_counter.go
// readRevisionCounter trims NULs at both ends and parses a base-10
// int64). A negative counter is refused. Errors are *MetaError.
func ParseRevisionCounter(data []byte) (int64, error) {
	s := strings.Trim(string(data), "\x00")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, &MetaError{File: RevisionCounterFile, Detail: fmt.Sprintf("not a counter: %q", truncate(s, 40))}
	}
	return n, nil
}

// decodeObject decodes exactly one JSON object, keys to raw values;
// duplicated keys are refused (the engine's decoder would take the last,
// a reader could take the first).
func decodeObject(data []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not a JSON object")
	}
	raw := map[string]json.RawMessage{}
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
		if _, dup := raw[key]; dup {
			return nil, fmt.Errorf("duplicate key %q", key)
		}
		raw[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the JSON object")
	}
	return raw, nil
}

// decodeValue decodes one value into dst; null is refused (the engine
// never writes it for these keys, except Labels, where it means none).
func decodeValue(v json.RawMessage, dst any) error {
	if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		if _, ok := dst.(*map[string]string); ok {
			return nil
		}
		return fmt.Errorf("null")
	}
	return json.Unmarshal(v, dst)
}

// plainName reports whether s names a file directly inside a directory:
// not empty, not . or .., no slash or NUL. The engine joins these names to
// the replica directory unchecked; a name that is not plain would lead
// elsewhere.
func plainName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00") && len(s) <= 255
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
