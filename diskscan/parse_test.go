package diskscan

import (
	"bytes"
	"errors"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/internal/bounded"
	"github.com/caretaker-storage/caretaker/internal/lhreplica"
)

func TestValidDataName(t *testing.T) {
	cases := map[string]bool{
		"pvc-1-r-1234abcd":                     true,
		"v-ABCDEFGH":                           true,
		"a-00000000":                           true,
		"pvc-1-r-1234abc":                      false, // 7
		"pvc-1-r-abcd":                         false, // 4-char suffix
		"pvc-1-r-1234abcd9":                    false, // 9 after the dash
		"pvc-1-r-1234_bcd":                     false,
		"-12345678":                            false, // no volume part
		"12345678":                             false,
		"nosuffixatall":                        false,
		"":                                     false,
		"..":                                   false,
		"a/b-12345678":                         false,
		"a\x00b-12345678":                      false,
		".caretaker-purge.x.del":               false,
		"pvc-é-r-1234abcd":                     true,  // Longhorn only checks the suffix
		strings.Repeat("a", 247) + "-12345678": false, // 256 bytes
		strings.Repeat("a", 246) + "-12345678": true,  // 255 bytes
	}
	for name, want := range cases {
		if got := ValidDataName(name); got != want {
			t.Errorf("ValidDataName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestTombstoneNames(t *testing.T) {
	for _, name := range []string{"pvc-1-r-1234abcd", "v-ABCDEFGH", strings.Repeat("a", 190) + "-12345678"} {
		if !purgeable(name) {
			t.Errorf("%q not purgeable", name)
		}
		p, err := newPurge(name)
		must(t, err)
		for _, entry := range []string{p.tombstone(), p.marker()} {
			if ValidDataName(entry) || SafeName(entry) != nil || len(entry) > nameMax {
				t.Errorf("purge entry %q of %q: valid=%v", entry, name, ValidDataName(entry))
			}
			got, isMarker, ok := parsePurgeEntry(entry)
			if !ok || got != p || isMarker != (entry == p.marker()) {
				t.Errorf("parsePurgeEntry(%q) = %+v, %v, %v", entry, got, isMarker, ok)
			}
		}
		if !looksLikeTombstone(p.tombstone()) || looksLikeTombstone(p.marker()) || strings.HasPrefix(p.marker(), tombstonePrefix) {
			t.Errorf("looksLikeTombstone wrong for %q / %q", p.tombstone(), p.marker())
		}
		if q, _ := newPurge(name); q.token == p.token {
			t.Errorf("two purges drew the token %s", p.token)
		}
	}
	if purgeable(strings.Repeat("a", 220) + "-12345678") {
		t.Error("a name whose marker is longer than NAME_MAX was accepted")
	}
	for _, n := range []string{"pvc-1-r-1234abcd", ".caretaker-purge.", ".del", "x.caretaker-purge.a.del",
		".caretaker-purge.pvc-1-r-1234abcd.del",                   // an older caretaker's: no token
		".caretaker-purge.pvc-1-r-1234abcd.0123456789ABCDEF.del",  // not lowercase hex
		".caretaker-purge.pvc-1-r-1234abcd.0123456789abcde.del",   // short token
		".caretaker-purge..0123456789abcdef.del",                  // no name
		".caretaker-purge.pvc-1-r-1234abcd.0123456789abcdef.mark", // a marker's suffix on a tombstone's prefix
		".caretaker-mark.pvc-1-r-1234abcd.0123456789abcdef.del",   // and the other way round
		".caretaker-mark.a/b.0123456789abcdef.mark"} {             // unsafe name
		if _, _, ok := parsePurgeEntry(n); ok {
			t.Errorf("%q taken for a tombstone or marker", n)
		}
	}
}

func TestFormatFSID(t *testing.T) {
	cases := []struct {
		w0, w1 int32
		want   string
	}{
		{0, 0, "000000000000"},
		{0, 1, "000000000001"},
		{1, 0, "000100000000"},
		{0x5981f42, 0x5b386190, "5981f425b386190"},
		{-1, 0, "ffffffff00000000"},          // a negative first word is not sign-extended into...
		{0, -1, "0000ffffffff"},              // ...and a negative second word does not spill into the first
		{-2023406815, 1, "8765432100000001"}, // 0x87654321
	}
	for _, c := range cases {
		if got := FormatFSID(c.w0, c.w1); got != c.want {
			t.Errorf("FormatFSID(%#x, %#x) = %s, want %s", c.w0, c.w1, got, c.want)
		}
	}
}

// FSID agrees with coreutils' `stat -f -c %i`, which Longhorn used before
// computing it in Go.
func TestFSIDMatchesStat(t *testing.T) {
	for _, p := range []string{t.TempDir(), "/", "/proc", "/dev"} {
		out, err := exec.Command("stat", "-f", "-c", "%i", p).Output()
		if err != nil {
			t.Skipf("skipped: no usable stat(1): %v", err)
		}
		want, err := strconv.ParseUint(strings.TrimSpace(string(out)), 16, 64)
		if err != nil {
			t.Fatalf("stat printed %q", out)
		}
		got, err := FSID(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) < 12 {
			t.Errorf("FSID(%s) = %q, shorter than 12 digits", p, got)
		}
		if g, _ := strconv.ParseUint(got, 16, 64); g != want {
			t.Errorf("FSID(%s) = %s, stat says %x", p, got, want)
		}
	}
}

func TestParseVolumeMeta(t *testing.T) {
	full := `{"Size":1073741824,"Head":"volume-head-002.img","Dirty":true,"Rebuilding":false,"Error":"","Parent":"volume-snap-a.img","SectorSize":512,"BackingFilePath":"","Encrypted":true,"New":1}`
	m, err := ParseVolumeMeta([]byte(full))
	want := VolumeMeta{Size: 1 << 30, Head: "volume-head-002.img", Dirty: true, Parent: "volume-snap-a.img", SectorSize: 512, Encrypted: true, Format: lhreplica.FormatV112}
	if err != nil || !reflect.DeepEqual(m, want) {
		t.Fatalf("%+v, %v", m, err)
	}
	bad := map[string]string{
		"empty":          ``,
		"null":           `null`,
		"array":          `[]`,
		"truncated":      full[:40],
		"trailing":       full + `{}`,
		"missing Parent": strings.Replace(full, `"Parent":"volume-snap-a.img",`, ``, 1),
		"Size string":    strings.Replace(full, `1073741824`, `"1073741824"`, 1),
		"Size negative":  strings.Replace(full, `1073741824`, `-1`, 1),
		"Head null":      strings.Replace(full, `"volume-head-002.img"`, `null`, 1),
		"Dirty string":   strings.Replace(full, `"Dirty":true`, `"Dirty":"yes"`, 1),
	}
	for name, in := range bad {
		_, err := ParseVolumeMeta([]byte(in))
		var pe *ParseError
		if !errors.As(err, &pe) || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want a ParseError wrapping ErrCorrupt", name, err)
		}
	}
	_, err = ReadVolumeMeta(strings.NewReader(full), int64(len(full)-1))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized: %v", err)
	}
	if _, err := ReadVolumeMeta(strings.NewReader(full), int64(len(full))); err != nil {
		t.Errorf("exactly at the limit: %v", err)
	}
	if _, err := ReadVolumeMeta(iotest.ErrReader(errors.New("EIO")), 0); err == nil || errors.Is(err, ErrCorrupt) {
		t.Errorf("read error: %v, want it passed through", err)
	}
}

func TestParseDiskConfig(t *testing.T) {
	c, err := ParseDiskConfig([]byte(`{"diskName":"disk-1","diskUUID":"2f8b-uuid","diskDriver":"","state":"ready"}`))
	if err != nil || c != (DiskConfig{DiskName: "disk-1", DiskUUID: "2f8b-uuid", State: "ready"}) {
		t.Fatalf("%+v, %v", c, err)
	}
	if c, err := ParseDiskConfig([]byte(`{"diskUUID":"u"}`)); err != nil || c.DiskUUID != "u" {
		t.Errorf("old format: %+v, %v", c, err)
	}
	for _, in := range []string{``, `null`, `{}`, `{"diskUUID":""}`, `{"diskUUID":" u"}`, `{"diskUUID":1}`, `{"diskUUID":"u"} x`, `[{"diskUUID":"u"}]`} {
		if _, err := ParseDiskConfig([]byte(in)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ParseDiskConfig(%q): %v", in, err)
		}
	}
	if _, err := ReadDiskConfig(strings.NewReader(`{"diskUUID":"u"}`), 5); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized: %v", err)
	}
}

const replicaList = `{
    "apiVersion": "v1",
    "items": [
        {
            "apiVersion": "longhorn.io/v1beta2",
            "kind": "Replica",
            "metadata": {"name": "pvc-1-r-aaaa1111", "namespace": "longhorn-system", "labels": {"longhornvolume": "pvc-1"}},
            "spec": {"active": true, "dataDirectoryName": "pvc-1-5b2e1a3c", "diskID": "uuid-1", "diskPath": "/var/lib/longhorn/", "nodeID": "node-1", "volumeName": "pvc-1"},
            "status": {"currentState": "running"}
        },
        {
            "kind": "Replica",
            "metadata": {"name": "pvc-2-r-bbbb2222"},
            "spec": {"dataDirectoryName": "", "diskID": "", "diskPath": "", "nodeID": ""}
        }
    ],
    "kind": "List",
    "metadata": {"resourceVersion": ""}
}`

func TestParseReplicaList(t *testing.T) {
	refs, err := ParseReplicaList(strings.NewReader(replicaList), 0)
	want := []ReplicaRef{
		{Name: "pvc-1-r-aaaa1111", NodeID: "node-1", DiskID: "uuid-1", DiskPath: "/var/lib/longhorn/", DataDirectoryName: "pvc-1-5b2e1a3c"},
		{Name: "pvc-2-r-bbbb2222"},
	}
	if err != nil || !reflect.DeepEqual(refs, want) {
		t.Fatalf("%+v, %v", refs, err)
	}
	if refs, err := ParseReplicaList(strings.NewReader(`{"kind":"List","items":[]}`), 0); err != nil || refs == nil || len(refs) != 0 {
		t.Errorf("empty list: %#v, %v", refs, err)
	}
	bad := map[string]string{
		"empty":            ``,
		"not an object":    `[]`,
		"no items":         `{"kind":"List"}`,
		"items not array":  `{"items":{}}`,
		"item not object":  `{"items":[1]}`,
		"no spec":          `{"items":[{"metadata":{"name":"x"}}]}`,
		"spec null":        `{"items":[{"spec":null}]}`,
		"wrong type":       `{"items":[{"spec":{"diskID":7}}]}`,
		"truncated":        replicaList[:len(replicaList)/2],
		"trailing garbage": replicaList + `x`,
		"two items keys":   `{"items":[],"items":[]}`,
	}
	for name, in := range bad {
		refs, err := ParseReplicaList(strings.NewReader(in), 0)
		if !errors.Is(err, ErrCorrupt) || refs != nil {
			t.Errorf("%s: %v, %v; want ErrCorrupt and no refs", name, refs, err)
		}
	}
	for _, limit := range []int64{10, int64(len(replicaList) - 1)} {
		if refs, err := ParseReplicaList(strings.NewReader(replicaList), limit); !errors.Is(err, ErrTooLarge) || refs != nil {
			t.Errorf("limit %d: %v, %v", limit, refs, err)
		}
	}
	if _, err := ParseReplicaList(strings.NewReader(replicaList+strings.Repeat(" ", 100)), int64(len(replicaList)+10)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("trailing white space over the limit: %v", err)
	}
}

func TestStaticExpected(t *testing.T) {
	d := Disk{NodeID: "n", Name: "d", Path: "/var/lib/longhorn", UUID: "u"}
	s := NewStaticExpected(
		ReplicaRef{DiskID: "u", NodeID: "other-node", DiskPath: "/stale", DataDirectoryName: "by-uuid-12345678"},
		ReplicaRef{DiskID: "v", DataDirectoryName: "other-disk-12345678"},
		ReplicaRef{NodeID: "n", DiskPath: "/var/lib/longhorn", DataDirectoryName: "by-path-12345678"},
		ReplicaRef{DiskPath: "/var/lib/longhorn", DataDirectoryName: "any-node-12345678"},
		ReplicaRef{NodeID: "m", DiskPath: "/var/lib/longhorn", DataDirectoryName: "node-m-12345678"},
		ReplicaRef{NodeID: "n", DiskPath: "/var/lib/longhorn/", DataDirectoryName: "slashed-12345678"},
		ReplicaRef{DiskID: "u"}, // unscheduled
	)
	set, err := s.Expected(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"by-uuid-12345678": true, "by-path-12345678": true, "any-node-12345678": true, "other-disk-12345678": false, "node-m-12345678": false, "slashed-12345678": true, "": false} {
		if set.Has(name) != want {
			t.Errorf("Has(%q) = %v", name, !want)
		}
	}
	// The host's disk path with Longhorn's trailing slash finds the
	// replicas whose spec has none, and the other way round.
	slashed, _ := s.Expected(t.Context(), Disk{NodeID: "n", Name: "d", Path: "/var/lib/longhorn/", UUID: "w"})
	if !slashed.Has("by-path-12345678") || !slashed.Has("slashed-12345678") || !slashed.Has("any-node-12345678") {
		t.Errorf("disk at /var/lib/longhorn/ expects %v", slashed)
	}
	before, _ := s.Expected(t.Context(), Disk{UUID: "v"})
	s.Add(ReplicaRef{DiskID: "v", DataDirectoryName: "late-12345678"})
	after, _ := s.Expected(t.Context(), Disk{UUID: "v"})
	if before.Has("late-12345678") || !after.Has("late-12345678") {
		t.Error("Add modified a set already handed out, or did not add")
	}
}

func FuzzParseVolumeMeta(f *testing.F) {
	f.Add([]byte(`{"Size":1,"Head":"h","Dirty":false,"Rebuilding":false,"Error":"","Parent":"","SectorSize":512,"BackingFilePath":""}`))
	f.Add([]byte(`{"Size":-1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ReadVolumeMeta(bytes.NewReader(data), 1024)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(data) > 1024 || m.Size < 0 || m.SectorSize < 0 {
			t.Fatalf("accepted %q as %+v", data, m)
		}
	})
}

func FuzzParseDiskConfig(f *testing.F) {
	f.Add([]byte(`{"diskName":"d","diskUUID":"u","diskDriver":"","state":"ready"}`))
	f.Add([]byte(`{"diskUUID":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ReadDiskConfig(bytes.NewReader(data), 1024)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if c.DiskUUID == "" || strings.TrimSpace(c.DiskUUID) != c.DiskUUID {
			t.Fatalf("accepted %q as %+v", data, c)
		}
	})
}

func FuzzParseReplicaList(f *testing.F) {
	f.Add([]byte(replicaList))
	f.Add([]byte(`{"items":[]}`))
	f.Add([]byte(`{"items":[{"spec":{}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		refs, err := ParseReplicaList(bytes.NewReader(data), 4096)
		if err != nil {
			if refs != nil || (!errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge)) {
				t.Fatalf("error %v with refs %v", err, refs)
			}
			return
		}
		if len(data) > 4096 || refs == nil {
			t.Fatalf("accepted %d bytes: %v", len(data), refs)
		}
	})
}

func FuzzDataName(f *testing.F) {
	f.Add("pvc-1-r-1234abcd")
	f.Add("..")
	f.Add("a/b-12345678")
	f.Fuzz(func(t *testing.T, name string) {
		valid := ValidDataName(name)
		if valid && SafeName(name) != nil {
			t.Fatalf("%q valid but unsafe", name)
		}
		if valid && isTombstone(name) {
			t.Fatalf("%q is both a replica and a tombstone", name)
		}
		if SafeName(name) == nil && purgeable(name) {
			p := purge{name: name, token: "0123456789abcdef"}
			if ValidDataName(p.tombstone()) || !isTombstone(p.tombstone()) || ValidDataName(p.marker()) {
				t.Fatalf("tombstone %q of %q", p.tombstone(), name)
			}
			if got, _, ok := parsePurgeEntry(p.tombstone()); !ok || got != p {
				t.Fatalf("parsePurgeEntry(%q) = %+v, %v", p.tombstone(), got, ok)
			}
		}
	})
}

// Every oversized input is the library's one "too large" class: a
// *ParseError naming the input, wrapping a *bounded.TooLargeError with the
// limit, and errors.Is(bounded.ErrTooLarge) across packages.
func TestTooLargeIsTheSharedClass(t *testing.T) {
	if ErrTooLarge != bounded.ErrTooLarge {
		t.Fatal("diskscan.ErrTooLarge is not internal/bounded's value")
	}
	meta := string(disktest.Meta(1))
	_, metaErr := ReadVolumeMeta(strings.NewReader(meta), 8)
	_, cfgErr := ReadDiskConfig(strings.NewReader(`{"diskUUID":"u"}`), 5)
	_, listErr := ParseReplicaList(strings.NewReader(replicaList), 10)
	for input, err := range map[string]error{MetaFile: metaErr, ConfigFile: cfgErr, "replica list": listErr} {
		var pe *ParseError
		var tl *bounded.TooLargeError
		if !errors.As(err, &pe) || pe.Input != input || !errors.As(err, &tl) || tl.What != input || tl.Limit <= 0 || !errors.Is(err, bounded.ErrTooLarge) {
			t.Errorf("%s: %v (%#v), want a ParseError wrapping a *bounded.TooLargeError", input, err, err)
		}
		if !strings.Contains(err.Error(), "larger than") || strings.Count(err.Error(), input) != 1 {
			t.Errorf("%s: message %q", input, err)
		}
	}
}
