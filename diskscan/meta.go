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

// VolumeMeta is a replica's volume.meta, as the v1 engine writes it.
type VolumeMeta struct {
	Size            int64
	Head            string
	Dirty           bool
	Rebuilding      bool
	Error           string
	Parent          string
	SectorSize      int64
	BackingFilePath string
	Encrypted       bool // only in newer versions; false when absent
}

// metaKeys are the keys every volume.meta has. Encrypted is optional.
var metaKeys = [...]string{"Size", "Head", "Dirty", "Rebuilding", "Error", "Parent", "SectorSize", "BackingFilePath"}

// ParseVolumeMeta parses a volume.meta. It requires a JSON object with
// every key of VolumeMeta except Encrypted, each of the right type, and a
// non-negative Size and SectorSize; other keys are ignored, so newer
// engines' files still parse. Errors are *ParseError wrapping ErrCorrupt.
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
