package diskscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/caretaker-storage/caretaker/internal/bounded"
)

// Default read limits. Real files are a few hundred bytes; the limits only
// stop a corrupt or hostile file from costing memory.
const (
	DefaultMaxMetaSize   = 64 << 10 // volume.meta
	DefaultMaxConfigSize = 64 << 10 // longhorn-disk.cfg
)

// VolumeMeta is a replica's volume.meta, as the v1 engine writes it: the
// JSON of longhorn-engine's replica Info (pkg/replica/replica.go, type
// Info; replica/replica.go before the pkg/ move), one object whose keys
// are its exported fields. Which keys a file has depends on the release
// that wrote it:
//
//	v0.1.0            Size Head Dirty Rebuilding Parent SectorSize
//	v0.2.0 – v1.0.2   ... SectorSize BackingFileName
//	v1.1.0            ... Error ... BackingFileName (Error added)
//	v1.1.1 – v1.11.x  ... Error ... BackingFilePath (renamed from BackingFileName)
//	v1.12.0 and later ... BackingFilePath Encrypted
//
// (replica/replica.go of the v0.x–v1.0 engine has Info with
// BackingFileName and no Error; pkg/replica/replica.go of v1.1.1 and later
// has Error and BackingFilePath.) A key a release did not write reads as
// its zero value.
type VolumeMeta struct {
	Size       int64
	Head       string
	Dirty      bool
	Rebuilding bool
	Error      string // v1.1.0 and later; "" when absent
	Parent     string
	SectorSize int64
	// BackingFilePath is the backing file the engine was given (v1.1.1
	// and later); "" when absent.
	BackingFilePath string
	// BackingFileName is the same for v0.2.0 to v1.1.0, which wrote
	// the backing file's name under this key; "" when absent.
	BackingFileName string
	Encrypted       bool // v1.12.0 and later; false when absent
}

// metaKeys are the keys every release of the engine writes (v0.1.0's
// Info): a volume.meta without one of them is not a replica's. Every other
// key of VolumeMeta is optional.
var metaKeys = [...]string{"Size", "Head", "Dirty", "Rebuilding", "Parent", "SectorSize"}

// ParseVolumeMeta parses a volume.meta. It requires a JSON object with
// the keys every engine release writes (Size, Head, Dirty, Rebuilding,
// Parent, SectorSize), not null; every key present of the right type; and
// a non-negative Size and SectorSize. The keys only some releases write
// (Error, BackingFileName, BackingFilePath, Encrypted) default to their
// zero values, and other keys are ignored, so the files of every released
// engine, older and newer, parse. Errors are *ParseError wrapping
// ErrCorrupt.
func ParseVolumeMeta(data []byte) (VolumeMeta, error) {
	// Nearly every file is the engine's own, which parseMetaFast reads in
	// one pass; it declines anything it is not sure encoding/json would
	// read exactly so, and then the general parse decides.
	if m, ok := parseMetaFast(data); ok {
		return m, nil
	}
	return parseVolumeMetaJSON(data)
}

// parseVolumeMetaJSON is ParseVolumeMeta through encoding/json: it
// decides every input parseMetaFast declines, with its error.
func parseVolumeMetaJSON(data []byte) (VolumeMeta, error) {
	var raw map[string]json.RawMessage
	if err := strictUnmarshal(data, &raw); err != nil {
		return VolumeMeta{}, corrupt(MetaFile, "not a JSON object: %v", err)
	}
	if raw == nil {
		return VolumeMeta{}, corrupt(MetaFile, "not a JSON object: null")
	}
	for _, k := range metaKeys {
		v, ok := raw[k]
		if !ok {
			return VolumeMeta{}, corrupt(MetaFile, "missing key %q", k)
		}
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return VolumeMeta{}, corrupt(MetaFile, "key %q is null", k)
		}
	}
	var m VolumeMeta
	if err := json.Unmarshal(data, &m); err != nil {
		return VolumeMeta{}, corrupt(MetaFile, "%v", err)
	}
	if m.Size < 0 || m.SectorSize < 0 {
		return VolumeMeta{}, corrupt(MetaFile, "negative Size %d or SectorSize %d", m.Size, m.SectorSize)
	}
	return m, nil
}

// ReadVolumeMeta reads and parses a volume.meta from r, reading at most
// limit bytes (DefaultMaxMetaSize if limit <= 0). A larger file is a
// *ParseError wrapping ErrTooLarge (a *bounded.TooLargeError).
func ReadVolumeMeta(r io.Reader, limit int64) (VolumeMeta, error) {
	data, err := readBounded(r, MetaFile, orDefault(limit, DefaultMaxMetaSize))
	if err != nil {
		return VolumeMeta{}, err
	}
	return ParseVolumeMeta(data)
}

// readBounded reads all of r if it holds at most limit bytes; a larger
// input is a *ParseError wrapping a *bounded.TooLargeError.
func readBounded(r io.Reader, input string, limit int64) ([]byte, error) {
	data, err := bounded.ReadAll(r, limit, input)
	var tl *bounded.TooLargeError
	switch {
	case errors.As(err, &tl):
		return nil, tooLarge(tl)
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", input, err)
	}
	return data, nil
}

// strictUnmarshal decodes exactly one JSON value with nothing after it.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}

func orDefault(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}
