package diskscan

import (
	"encoding/json"
	"io"
	"strings"
)

// DiskConfig is a disk's longhorn-disk.cfg.
type DiskConfig struct {
	DiskName   string `json:"diskName"`
	DiskUUID   string `json:"diskUUID"`
	DiskDriver string `json:"diskDriver"`
	State      string `json:"state"`
}

// ParseDiskConfig parses a longhorn-disk.cfg: a JSON object whose diskUUID
// is a non-empty string without surrounding white space. The other fields
// are optional (older Longhorn wrote only diskUUID). Errors are
// *ParseError wrapping ErrCorrupt.
func ParseDiskConfig(data []byte) (DiskConfig, error) {
	var raw map[string]json.RawMessage
	if err := strictUnmarshal(data, &raw); err != nil || raw == nil {
		return DiskConfig{}, corrupt(ConfigFile, "not a JSON object")
	}
	var c DiskConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return DiskConfig{}, corrupt(ConfigFile, "%v", err)
	}
	if c.DiskUUID == "" {
		return DiskConfig{}, corrupt(ConfigFile, "no diskUUID")
	}
	if strings.TrimSpace(c.DiskUUID) != c.DiskUUID {
		return DiskConfig{}, corrupt(ConfigFile, "diskUUID %q has surrounding white space", c.DiskUUID)
	}
	return c, nil
}

// ReadDiskConfig reads and parses a longhorn-disk.cfg from r, reading at
// most limit bytes (DefaultMaxConfigSize if limit <= 0). A larger file is
// a *ParseError wrapping ErrTooLarge.
func ReadDiskConfig(r io.Reader, limit int64) (_ DiskConfig, err error) {
	defer withPrefix(&err)
	data, err := readBounded(r, ConfigFile, orDefault(limit, DefaultMaxConfigSize))
	if err != nil {
		return DiskConfig{}, err
	}
	return ParseDiskConfig(data)
}
