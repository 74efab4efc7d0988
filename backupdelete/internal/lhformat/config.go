// Package lhformat is Longhorn's backupstore format with no storage under
// it: the volume and backup cfgs (parsing, writing, the key-preserving
// rewrite of volume.cfg), the layout's paths, block checksums, and the
// lock protocol's file format, ranking and expiry. fsstore (files) and
// s3store (objects) both build on it, so the two write the same bytes and
// decide locks the same way.
package lhformat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Volume is volume.cfg. The Go-style capitalised keys and the string
// encoding of 64-bit numbers are Longhorn's. Longhorn also tags some string
// fields `json:",string"` (BackingImageName, BackingImageChecksum,
// CompressionMethod, StorageClassName, DataEngine), so their values are
// JSON strings holding JSON strings ("\"lz4\""); ParseVolume unwraps them
// and WriteVolume wraps them again.
type Volume struct {
	Name                 string
	Size                 int64
	Labels               map[string]string
	CreatedTime          string
	LastBackupName       string
	LastBackupAt         string
	BlockCount           int64
	BackingImageName     string
	BackingImageChecksum string
	CompressionMethod    string
	StorageClassName     string
	DataEngine           string
}

// Backup is backups/backup_<name>.cfg. An empty CreatedTime means the
// backup is still being written.
type Backup struct {
	Name              string
	VolumeName        string
	SnapshotName      string
	SnapshotCreatedAt string
	CreatedTime       string
	Size              int64
	Labels            map[string]string
	Parameters        map[string]string
	IsIncremental     bool
	CompressionMethod string
	Blocks            []BlockMapping
}

// InProgress reports whether the backup is still being written.
func (b Backup) InProgress() bool { return b.CreatedTime == "" }

// BlockMapping is one block of a backup: where it goes in the volume and
// the checksum naming its file.
type BlockMapping struct {
	Offset        int64
	BlockChecksum string
}

// volumeJSON is volume.cfg as Longhorn's struct encodes it.
type volumeJSON struct {
	Name                 string
	Size                 int64 `json:",string"`
	Labels               map[string]string
	CreatedTime          string
	LastBackupName       string
	LastBackupAt         string
	BlockCount           int64           `json:",string"`
	BackingImageName     json.RawMessage `json:",omitempty"`
	BackingImageChecksum json.RawMessage `json:",omitempty"`
	CompressionMethod    json.RawMessage `json:",omitempty"`
	StorageClassName     json.RawMessage `json:",omitempty"`
	DataEngine           json.RawMessage `json:",omitempty"`
}

// backupJSON is a backup cfg as Longhorn's struct encodes it, in its field
// order. ProcessingBlocks is an exported pointer Longhorn never tags, so it
// is written as null; SingleFile is a struct, so omitempty does not drop it.
type backupJSON struct {
	Name                  string
	VolumeName            string
	SnapshotName          string
	SnapshotCreatedAt     string
	CreatedTime           string
	Size                  int64 `json:",string"`
	Labels                map[string]string
	Parameters            map[string]string
	IsIncremental         bool
	CompressionMethod     string
	NewlyUploadedDataSize int64 `json:",string"`
	ReUploadedDataSize    int64 `json:",string"`
	ProcessingBlocks      *struct{}
	Blocks                []BlockMapping `json:",omitempty"`
	SingleFile            struct{ FilePath string }
}

// ParseVolume parses volume.cfg. Bad JSON, a wrong type, or a name that is
// not a valid backupstore name is an error wrapping ErrCorrupt.
func ParseVolume(data []byte) (Volume, error) {
	var j volumeJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return Volume{}, Corrupt("volume.cfg", err)
	}
	v := Volume{Name: j.Name, Size: j.Size, Labels: j.Labels, CreatedTime: j.CreatedTime,
		LastBackupName: j.LastBackupName, LastBackupAt: j.LastBackupAt, BlockCount: j.BlockCount}
	for _, f := range []struct {
		raw json.RawMessage
		dst *string
		key string
	}{
		{j.BackingImageName, &v.BackingImageName, "BackingImageName"},
		{j.BackingImageChecksum, &v.BackingImageChecksum, "BackingImageChecksum"},
		{j.CompressionMethod, &v.CompressionMethod, "CompressionMethod"},
		{j.StorageClassName, &v.StorageClassName, "StorageClassName"},
		{j.DataEngine, &v.DataEngine, "DataEngine"},
	} {
		s, err := unwrapStringField(f.raw)
		if err != nil {
			return Volume{}, Corrupt("volume.cfg", fmt.Errorf("%s: %w", f.key, err))
		}
		*f.dst = s
	}
	if !ValidName(v.Name) {
		return Volume{}, Corrupt("volume.cfg", fmt.Errorf("invalid volume name %q", v.Name))
	}
	if v.Size < 0 || v.BlockCount < 0 {
		return Volume{}, Corrupt("volume.cfg", fmt.Errorf("negative Size or BlockCount"))
	}
	return v, nil
}

// unwrapStringField reads a field Longhorn tags `json:",string"` on a Go
// string: normally a JSON string holding a JSON string. A plain string (a
// writer that did not double-encode) is accepted as is; null or absent is "".
func unwrapStringField(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var outer string
	if err := json.Unmarshal(raw, &outer); err != nil {
		return "", err
	}
	if inner, err := strconv.Unquote(outer); err == nil && len(outer) >= 2 && outer[0] == '"' {
		return inner, nil
	}
	return outer, nil
}

// EncodeVolume writes v as Longhorn does: its fields in Longhorn's order,
// the int64 fields as JSON strings, the string fields Longhorn tags
// `json:",string"` double-encoded.
func EncodeVolume(v Volume) ([]byte, error) {
	wrap := func(s string) json.RawMessage {
		inner, _ := json.Marshal(s)
		outer, _ := json.Marshal(string(inner))
		return outer
	}
	return json.Marshal(volumeJSON{
		Name: v.Name, Size: v.Size, Labels: v.Labels, CreatedTime: v.CreatedTime,
		LastBackupName: v.LastBackupName, LastBackupAt: v.LastBackupAt, BlockCount: v.BlockCount,
		BackingImageName: wrap(v.BackingImageName), BackingImageChecksum: wrap(v.BackingImageChecksum),
		CompressionMethod: wrap(v.CompressionMethod), StorageClassName: wrap(v.StorageClassName),
		DataEngine: wrap(v.DataEngine),
	})
}

// ParseBackup parses a backup cfg. Bad JSON, a wrong type, an invalid name
// or a block checksum that cannot name a block file is an error wrapping
// ErrCorrupt: a cfg that cannot be trusted stops block
// collection rather than letting it guess.
func ParseBackup(data []byte) (Backup, error) {
	var j backupJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return Backup{}, Corrupt("backup cfg", err)
	}
	b := Backup{Name: j.Name, VolumeName: j.VolumeName, SnapshotName: j.SnapshotName,
		SnapshotCreatedAt: j.SnapshotCreatedAt, CreatedTime: j.CreatedTime, Size: j.Size,
		Labels: j.Labels, Parameters: j.Parameters, IsIncremental: j.IsIncremental,
		CompressionMethod: j.CompressionMethod, Blocks: j.Blocks}
	if err := CheckBackup(b.Name, b.VolumeName, b.Blocks); err != nil {
		return Backup{}, err
	}
	return b, nil
}

// CheckBackup checks what makes a backup cfg trustworthy: valid backup
// and volume names, and block checksums that can name a block (see
// ValidChecksum) at non-negative offsets. Its error wraps
// ErrCorrupt.
func CheckBackup(name, volume string, blocks []BlockMapping) error {
	if err := CheckNames(name, volume); err != nil {
		return err
	}
	for i, m := range blocks {
		if !ValidChecksum(m.BlockChecksum) {
			return Corrupt("backup cfg", ErrBadChecksum(i, m.BlockChecksum))
		}
		if m.Offset < 0 {
			return Corrupt("backup cfg", fmt.Errorf("block %d: negative offset", i))
		}
	}
	return nil
}

// CheckNames checks a backup cfg's backup and volume names.
func CheckNames(name, volume string) error {
	if !ValidName(name) {
		return Corrupt("backup cfg", fmt.Errorf("invalid backup name %q", name))
	}
	if !ValidName(volume) {
		return Corrupt("backup cfg", fmt.Errorf("invalid volume name %q", volume))
	}
	return nil
}

// ErrBadChecksum is the error for block i's invalid checksum.
func ErrBadChecksum(i int, ck string) error {
	return fmt.Errorf("block %d: invalid checksum %q", i, ck)
}

// EncodeBackup writes b as Longhorn does (see backupJSON).
func EncodeBackup(b Backup) ([]byte, error) {
	return json.Marshal(backupJSON{
		Name: b.Name, VolumeName: b.VolumeName, SnapshotName: b.SnapshotName,
		SnapshotCreatedAt: b.SnapshotCreatedAt, CreatedTime: b.CreatedTime, Size: b.Size,
		Labels: b.Labels, Parameters: b.Parameters, IsIncremental: b.IsIncremental,
		CompressionMethod: b.CompressionMethod, Blocks: b.Blocks,
	})
}

// Corrupt wraps err in ErrCorrupt, naming what was corrupt.
func Corrupt(what string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrCorrupt, what, err)
}

// volumeKeyOrder is the field order of Longhorn's Volume struct
// (longhorn/backupstore backupstore.go, type Volume), in which
// json.Marshal writes volume.cfg.
var volumeKeyOrder = []string{
	"Name", "Size", "Labels", "CreatedTime", "LastBackupName", "LastBackupAt", "BlockCount",
	"BackingImageName", "BackingImageChecksum", "CompressionMethod", "StorageClassName", "DataEngine",
}

// RawObject is a JSON object's members with their values as raw bytes, in
// the order the file has them. It is how volume.cfg is rewritten: only
// the changed values are replaced, every other value keeps its bytes, and
// fields this package does not know (a newer Longhorn's) survive.
type RawObject struct {
	keys []string
	vals map[string]json.RawMessage
}

// ParseVolumeObject reads volume.cfg's members. A key that matches one of
// Longhorn's field names regardless of case is stored under that name, as
// encoding/json (and so Longhorn) reads it; of duplicates the last wins,
// as there too.
func ParseVolumeObject(data []byte) (RawObject, error) {
	o := RawObject{vals: map[string]json.RawMessage{}}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return o, fmt.Errorf("not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return o, err
		}
		key, _ := tok.(string)
		for _, k := range volumeKeyOrder {
			if strings.EqualFold(key, k) {
				key = k
				break
			}
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return o, err
		}
		if _, dup := o.vals[key]; !dup {
			o.keys = append(o.keys, key)
		}
		o.vals[key] = val
	}
	if _, err := dec.Token(); err != nil {
		return o, err
	}
	return o, nil
}

// Set replaces (or adds) a member's value.
func (o *RawObject) Set(key string, val json.RawMessage) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = val
}

// ApplyDeletion sets the members of volume.cfg that a backup's deletion
// changes, as Longhorn's DeleteDeltaBlockBackup does: when the deleted
// backup was the volume's last (updateLast), LastBackupName and
// LastBackupAt become the latest remaining backup, or are cleared rather
// than guessed when the blocks were not collected; when they were
// (collected), BlockCount becomes the number of blocks still referenced.
// It reports whether anything changed.
func (o *RawObject) ApplyDeletion(updateLast, collected bool, latest LatestBackup, referenced int) bool {
	if updateLast {
		last, at := "", ""
		if collected {
			last, at = latest.Name, latest.At
		}
		lastJSON, _ := json.Marshal(last)
		atJSON, _ := json.Marshal(at)
		o.Set("LastBackupName", lastJSON)
		o.Set("LastBackupAt", atJSON)
	}
	if collected {
		count, _ := json.Marshal(strconv.Itoa(referenced))
		o.Set("BlockCount", count)
	}
	return updateLast || collected
}

// MarshalVolume writes the members as Longhorn's struct would: its fields
// in its order, then any others in the order the file had them. Values
// are compacted, as json.Marshal compacts a json.RawMessage.
func (o *RawObject) MarshalVolume() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	write := func(key string) error {
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		buf.Write(k)
		buf.WriteByte(':')
		return json.Compact(&buf, o.vals[key])
	}
	known := map[string]bool{}
	for _, k := range volumeKeyOrder {
		known[k] = true
		if _, ok := o.vals[k]; ok {
			if err := write(k); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range o.keys {
		if !known[k] {
			if err := write(k); err != nil {
				return nil, err
			}
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// BlockCount is volume.cfg's BlockCount, if it has a valid one.
func (o RawObject) BlockCount() (int, bool) {
	raw, ok := o.vals["BlockCount"]
	if !ok {
		return 0, false
	}
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(str)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
