package diskscan

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/internal/lhreplica/lhreplicatest"
)

// TestParseVolumeMetaEveryRelease: the volume.meta of every engine
// release parses, through the fast path, to what it says; the reference
// agrees. (Before, every key but Encrypted was required, so a replica
// written by an engine older than v1.1.1 was "not a replica".)
func TestParseVolumeMetaEveryRelease(t *testing.T) {
	for _, r := range lhreplicatest.ReleaseForms() {
		m, err := ParseVolumeMeta([]byte(r.File))
		if err != nil || !reflect.DeepEqual(m, r.Want) {
			t.Errorf("%s: %+v, %v; want %+v", r.Release, m, err, r.Want)
		}
	}
}

// TestParseVolumeMetaRequiresWhatEveryReleaseWrites: without one of the
// keys every release writes (or with it null), a volume.meta is corrupt,
// and the error names the key.
func TestParseVolumeMetaRequiresWhatEveryReleaseWrites(t *testing.T) {
	v010 := lhreplicatest.ReleaseForms()[0].File
	for _, k := range []string{"Size", "Head", "Dirty", "Rebuilding", "Parent", "SectorSize"} {
		var without string
		for _, part := range strings.Split(strings.Trim(strings.TrimSpace(v010), "{}"), ",") {
			if !strings.HasPrefix(part, `"`+k+`":`) {
				without += "," + part
			}
		}
		without = "{" + strings.TrimPrefix(without, ",") + "}"
		if _, err := ParseVolumeMeta([]byte(without)); !errorsIs(err, ErrCorrupt) || !strings.Contains(err.Error(), k) {
			t.Errorf("without %s: %v", k, err)
		}
	}
}

// TestScanSeesEveryReleaseAndSaysWhyNot: a replica directory written by
// each engine release is an orphan to the scan; a directory Longhorn
// would report as an orphan whose volume.meta caretaker does not take for
// a replica's is skipped with the reason, never left out silently.
func TestScanSeesEveryReleaseAndSaysWhyNot(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	wantOrphan := map[string]bool{}
	for i, r := range lhreplicatest.ReleaseForms() {
		name := "pvc-rel" + string(rune('a'+i)) + "-r-0000000" + string(rune('a'+i))
		replica(t, d, name, disktest.Replica{Meta: []byte(r.File)})
		wantOrphan[name] = true
	}
	engine := string(disktest.Meta(1 << 20))
	damaged := map[string]string{
		"pvc-empty-r-0000000e":    `{}`,
		"pvc-null-r-0000000f":     `null`,
		"pvc-nosize-r-0000000g":   strings.Replace(engine, `"Size":1048576,`, ``, 1),
		"pvc-nohead-r-0000000h":   strings.Replace(engine, `"Head":"volume-head-000.img",`, ``, 1),
		"pvc-negative-r-0000000i": strings.Replace(engine, `1048576`, `-1`, 1),
		"pvc-headnull-r-0000000j": strings.Replace(engine, `"volume-head-000.img"`, `null`, 1),
		"pvc-other-r-0000000k":    `{"Size":1,"Head":"h","Dirty":false,"Rebuilding":false,"Parent":"","SectorSize":512,"Error":7}`,
		// Not replicas by the scan's policy, which is salvage.Inspect's:
		// the last-copy guard would call such a copy unrecoverable, so the
		// scan must never offer it for deletion.
		"pvc-size0-r-0000000l":  strings.Replace(engine, `1048576`, `0`, 1),
		"pvc-nohead-r-0000000m": strings.Replace(engine, `"volume-head-000.img"`, `""`, 1),
		// Read differently by the engine and a careful reader: corrupt.
		"pvc-dup-r-0000000n":      strings.Replace(engine, `}`, `,"Size":2097152}`, 1),
		"pvc-fold-r-0000000o":     strings.Replace(engine, `}`, `,"size":2097152}`, 1),
		"pvc-twoback-r-0000000p":  strings.Replace(engine, `}`, `,"BackingFileName":"b"}`, 1),
		"pvc-headpath-r-0000000q": strings.Replace(engine, `"volume-head-000.img"`, `"../../x"`, 1),
	}
	for name, meta := range damaged {
		replica(t, d, name, disktest.Replica{Meta: []byte(meta)})
	}
	f := newFixture(t, d)
	f.expect(d, "pvc-kept-r-00000009") // an expected set that is not empty, so Delete may purge
	rep := f.scan().Disks[0]
	orphans := map[string]bool{}
	for _, o := range rep.Orphans {
		orphans[o.Name] = true
	}
	skipped := skippedReasons(rep)
	for name := range wantOrphan {
		if !orphans[name] {
			t.Errorf("%s: not an orphan (skipped: %q)", name, skipped[name])
		}
	}
	for name, meta := range damaged {
		if orphans[name] {
			t.Errorf("%s (%s): an orphan", name, meta)
			continue
		}
		if !strings.Contains(skipped[name], MetaFile) {
			t.Errorf("%s (%s): skipped %q, want the reason naming %s", name, meta, skipped[name], MetaFile)
		}
		if lhreplicatest.LonghornReads([]byte(meta)) && skipped[name] == "" {
			t.Errorf("%s: Longhorn reports it as an orphan, caretaker says nothing", name)
		}
	}
	// Every Longhorn orphan among these is an orphan or skipped with a reason.
	for name := range wantOrphan {
		if !orphans[name] && skipped[name] == "" {
			t.Errorf("%s: missing from the report", name)
		}
	}
	// Delete checks volume.meta again at purge time, by the same rule: a
	// v0.1.0 replica can be purged.
	if err := f.o.Delete(context.Background(), record(t, d, "pvc-rela-r-0000000a")); err != nil {
		t.Errorf("Delete of a v0.1.0 replica: %v", err)
	}
	if !lhreplicatest.LonghornReads([]byte(damaged["pvc-empty-r-0000000e"])) {
		t.Error("the Longhorn check refuses {}: the test's premise is wrong")
	}
}
