package lhreplica

import (
	"strconv"
	"strings"
	"time"
)

// LayerMeta is a layer's <image>.meta (longhorn-engine
// pkg/replica/replica.go, type disk). v0.1.0 wrote only Parent, v0.2.0
// Parent and Removed; the others came with v0.3.0. The engine ignores the
// Name key on read (readDiskData names the entry after the file), and so
// does ParseLayerMeta.
type LayerMeta struct {
	Parent      string // the image below, "" at the bottom
	Removed     bool   // a snapshot the user deleted, not merged yet
	UserCreated bool
	Created     string // RFC 3339, as written; "" when absent
	Labels      map[string]string
}

// layerFields are the keys ParseLayerMeta reads.
var layerFields = [...]string{"Parent", "Removed", "UserCreated", "Created", "Labels"}

// ParseLayerMeta parses a layer's .meta of any release: one JSON object
// (then only white space) with at least Parent, no key twice, each known
// key of its type and not null (but Labels, where null means none),
// Parent "" or a plain file name. Other keys (Name among them) are
// ignored. Errors are *MetaError wrapping ErrCorrupt, naming file.
func ParseLayerMeta(file string, data []byte) (LayerMeta, error) {
	raw, err := decodeObject(data)
	if err != nil {
		return LayerMeta{}, corrupt(file, "%v", err)
	}
	var m LayerMeta
	dst := [...]any{&m.Parent, &m.Removed, &m.UserCreated, &m.Created, &m.Labels}
	hasParent := false
	for _, kv := range raw {
		for i, f := range layerFields {
			if kv.key != f {
				continue
			}
			hasParent = hasParent || i == 0
			if err := decodeValue(kv.value, dst[i], f == "Labels"); err != nil {
				return LayerMeta{}, corrupt(file, "key %q: %v", kv.key, err)
			}
		}
	}
	if !hasParent {
		return LayerMeta{}, corrupt(file, "missing key %q", "Parent")
	}
	if m.Parent != "" && !PlainName(m.Parent) {
		return LayerMeta{}, corrupt(file, "Parent %q is not a file name in the directory", m.Parent)
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
// int64). A negative counter is refused. Errors are *MetaError wrapping
// ErrCorrupt.
func ParseRevisionCounter(data []byte) (int64, error) {
	s := strings.Trim(string(data), "\x00")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, corrupt(RevisionCounterFile, "not a counter: %q", truncate(s, 40))
	}
	return n, nil
}

// truncate shortens s to n bytes and marks the cut, for error texts.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
