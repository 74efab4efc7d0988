package diskscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/caretaker-storage/caretaker/internal/bounded"
	"github.com/caretaker-storage/caretaker/internal/lhreplica"
)

// Default read limits. Real files are a few hundred bytes; the limits only
// stop a corrupt or hostile file from costing memory.
const (
	DefaultMaxMetaSize   = 64 << 10 // volume.meta
	DefaultMaxConfigSize = 64 << 10 // longhorn-disk.cfg
)

// VolumeMeta is a replica's volume.meta in any engine release's form
// (longhorn-engine pkg/replica/replica.go, type Info): Size, Head, Dirty,
// Rebuilding, Parent and SectorSize since v0.1.0; BackingFileName from
// v0.2.0, renamed BackingFilePath in v1.1.1 (both read into
// BackingFilePath, Format says which key the file had); Error from
// v1.1.0; Encrypted from v1.12.0. A key the release did not write reads
// as its zero value. It is the same type as salvage.VolumeMeta.
type VolumeMeta = lhreplica.VolumeMeta

// ParseVolumeMeta parses a replica's volume.meta by the scan's rule. The
// file must be in the replica format of some engine release, read
// strictly (one JSON object with the keys every release writes, of their
// types and not null; no key twice or matching a field only without
// regard to case; not both backing-file keys; Size and SectorSize not
// negative; Head "" or a plain file name). On top of the format, the
// scan's policy: Size above 0 and a Head named. A directory whose
// volume.meta fails either is not a replica to the scan: it is skipped
// with the reason (DiskReport.Skipped) and never deleted. The policy is
// the one salvage.Inspect applies to call a copy's metadata recoverable,
// so that no directory the scan reports as a replica is a copy the
// last-copy guard would take for corrupt. Errors are *ParseError wrapping
// ErrCorrupt.
func ParseVolumeMeta(data []byte) (VolumeMeta, error) {
	m, err := lhreplica.ParseVolumeMeta(data)
	var me *lhreplica.MetaError
	switch {
	case errors.As(err, &me):
		return VolumeMeta{}, corrupt(MetaFile, "%s", me.Detail)
	case err != nil:
		return VolumeMeta{}, corrupt(MetaFile, "%v", err)
	}
	if why := scanPolicy(m); why != "" {
		return VolumeMeta{}, corrupt(MetaFile, "%s", why)
	}
	return m, nil
}

// scanPolicy says why a volume.meta in the format is still not a
// replica's to the scan, or "" if it is. Longhorn's own check is weaker
// (longhorn-manager controller/monitor/disk_monitor.go takes any file
// that unmarshals, even {}); the scan is stricter so that it never offers
// for deletion what salvage.Inspect would call unrecoverable: a Size of 0
// (the engine reads nothing, yet the layers may hold data) and no Head (a
// volume.meta the engine's read-only open could not recover,
// tryRecoverVolumeMetaFile).
func scanPolicy(m VolumeMeta) string {
	switch {
	case m.Size <= 0:
		return "Size 0: no volume size recorded"
	case m.Head == "":
		return "no Head image named"
	}
	return ""
}

// ReadVolumeMeta reads and parses a volume.meta from r, reading at most
// limit bytes (DefaultMaxMetaSize if limit <= 0). A larger file is a
// *ParseError wrapping ErrTooLarge (a *bounded.TooLargeError).
func ReadVolumeMeta(r io.Reader, limit int64) (_ VolumeMeta, err error) {
	defer withPrefix(&err)
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
