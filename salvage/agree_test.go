package salvage_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/internal/lhreplica/lhreplicatest"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/salvage"
)

// The scan (diskscan: is this directory a replica, to be reported and
// perhaps deleted?) and the inspection (salvage: can the volume's data be
// recovered from it? the last-copy guard's input through CopyInventory)
// read one replica format. These tests show they agree on every input
// where their policies do not differ. Where they differ by policy:
//
//   - Directory names: the scan takes only Longhorn's
//     <volume>-<8 letters or digits> (diskscan.ValidDataName); the
//     inspection reads any directory and, for a name not of that form,
//     names the volume after the whole name (Inspection.Volume, so Rank
//     never compares copies of different volumes). The guard does not use
//     that naming: CopyInventory gives it orphan.VolumeOfDataName, which
//     is "" (volume unknown) exactly where ValidDataName is false.
//   - volume.meta: no difference. Size 0 and a missing Head are in the
//     format, and both refuse them by policy: the inspection because there
//     is nothing to read by the engine's rules, the scan so that it never
//     offers for deletion a copy the inspection would call unrecoverable.
//   - What the inspection judges beyond volume.meta (layers, chain, Error,
//     Rebuilding, revision counter) the scan does not look at: such a copy
//     is a replica to the scan and not recoverable to the inspection. That
//     is the guard's concern (orphan.Copy.Recoverable), not the format's.

// checkAgree fails t unless diskscan and salvage both accept data as the
// same VolumeMeta, or both refuse it with the same reason.
func checkAgree(t *testing.T, data []byte) (accepted bool) {
	t.Helper()
	sm, serr := diskscan.ParseVolumeMeta(data)
	im, ierr := salvage.ParseVolumeMeta(data)
	if serr == nil && ierr != nil {
		t.Fatalf("%q: a replica to the scan (%+v), corrupt to the inspection: %v", data, sm, ierr)
	}
	if serr != nil && ierr == nil {
		t.Fatalf("%q: recoverable metadata to the inspection (%+v), not a replica to the scan: %v", data, im, serr)
	}
	if serr == nil {
		if !reflect.DeepEqual(sm, im) {
			t.Fatalf("%q: the scan read %+v, the inspection %+v", data, sm, im)
		}
		return true
	}
	var pe *diskscan.ParseError
	var me *salvage.MetaError
	if !errors.As(serr, &pe) || !errors.Is(serr, diskscan.ErrCorrupt) || !errors.As(ierr, &me) || !errors.Is(ierr, salvage.ErrCorrupt) {
		t.Fatalf("%q: error classes: scan %T %v, inspection %T %v", data, serr, serr, ierr, ierr)
	}
	if pe.Input != "volume.meta" || me.File != "volume.meta" || pe.Reason != me.Detail {
		t.Fatalf("%q: the scan says %s: %q, the inspection %s: %q", data, pe.Input, pe.Reason, me.File, me.Detail)
	}
	return false
}

// releaseForms are volume.meta as each engine release writes it
// (lhreplicatest.ReleaseForms): the starting points of the generator.
var releaseForms = func() []string {
	var files []string
	for _, r := range lhreplicatest.ReleaseForms() {
		files = append(files, r.File)
	}
	return files
}()

// metaKeys are the keys of every release, and spellings near them.
var metaKeys = []string{"Size", "Head", "Dirty", "Rebuilding", "Error", "Parent", "SectorSize",
	"BackingFileName", "BackingFilePath", "Encrypted"}

// randomValue is a JSON value of one of the shapes a volume.meta key may
// be given: right for some keys, wrong for others.
func randomValue(rng *rand.Rand) string {
	vals := []string{`0`, `1`, `512`, `1048576`, `-1`, `-0`, `01`, `1.5`, `1e3`, `9223372036854775807`,
		`9223372036854775808`, `true`, `false`, `null`, `""`, `"volume-head-001.img"`, `"volume-snap-a.img"`,
		`".."`, `"."`, `"../x"`, `"/abs/path"`, `"a\u0000b"`, `"\u0048ead"`, `"h\u00e9"`, "\"\xff\"", `[]`, `{}`,
		`{"a":[1]}`, `"1"`, `"true"`, `"` + strings.Repeat("x", 256) + `"`}
	return vals[rng.Intn(len(vals))]
}

// randomKey is a key of a release, a case or Unicode-fold variant of one,
// or a key of none.
func randomKey(rng *rand.Rand) string {
	k := metaKeys[rng.Intn(len(metaKeys))]
	switch rng.Intn(8) {
	case 0:
		return strings.ToLower(k)
	case 1:
		return strings.ToUpper(k)
	case 2:
		return strings.Replace(strings.ToLower(k), "s", "ſ", 1) // folds to s
	case 3:
		return []string{"Name", "BackingFile", "X", "Labels", ""}[rng.Intn(5)]
	}
	return k
}

// randomMeta builds a volume.meta-like input: an engine form changed in
// one to four ways (a key dropped, repeated, renamed or added, a value
// replaced, white space, a cut, a stray byte), or an object of random
// members.
func randomMeta(rng *rand.Rand) []byte {
	if rng.Intn(6) == 0 {
		var members []string
		for range rng.Intn(12) {
			members = append(members, fmt.Sprintf("%q:%s", randomKey(rng), randomValue(rng)))
		}
		return []byte("{" + strings.Join(members, ",") + "}")
	}
	form := strings.TrimSpace(releaseForms[rng.Intn(len(releaseForms))])
	members := strings.Split(form[1:len(form)-1], ",")
	for range 1 + rng.Intn(4) {
		if len(members) == 0 {
			break
		}
		i := rng.Intn(len(members))
		key, value, _ := strings.Cut(members[i], ":")
		switch rng.Intn(10) {
		case 0: // drop a member
			members = append(members[:i], members[i+1:]...)
		case 1: // repeat a member, maybe with another value
			members = append(members, key+":"+randomValue(rng))
		case 2: // rename a key
			members[i] = fmt.Sprintf("%q:", randomKey(rng)) + value
		case 3: // add a member
			members = append(members, fmt.Sprintf("%q:%s", randomKey(rng), randomValue(rng)))
		case 4, 5, 6: // replace a value
			members[i] = key + ":" + randomValue(rng)
		default:
			members[i] = " \n" + members[i] + "\t"
		}
	}
	s := "{" + strings.Join(members, ",") + "}"
	switch rng.Intn(12) {
	case 0:
		s = s[:rng.Intn(len(s)+1)]
	case 1:
		p := rng.Intn(len(s) + 1)
		s = s[:p] + string([]byte{byte(rng.Intn(256))}) + s[p:]
	case 2:
		s += "\n"
	}
	return []byte(s)
}

// TestScanAndInspectionAgreeOnVolumeMeta: on random volume.meta inputs
// derived from every release's form, the scan and the inspection accept
// the same files as the same VolumeMeta and refuse the rest with the same
// reason. Both sides must be exercised.
func TestScanAndInspectionAgreeOnVolumeMeta(t *testing.T) {
	rng := rand.New(rand.NewSource(34))
	accepted, refused := 0, 0
	for _, f := range releaseForms {
		if !checkAgree(t, []byte(f)) {
			t.Fatalf("%s: an engine's form is refused", f)
		}
	}
	for range 20000 {
		if checkAgree(t, randomMeta(rng)) {
			accepted++
		} else {
			refused++
		}
	}
	t.Logf("%d accepted by both, %d refused by both", accepted, refused)
	if accepted < 2000 || refused < 2000 {
		t.Fatalf("the generator is one-sided: %d accepted, %d refused", accepted, refused)
	}
}

// FuzzScanAndInspectionAgree is the same property on any input.
func FuzzScanAndInspectionAgree(f *testing.F) {
	rng := rand.New(rand.NewSource(1))
	for _, s := range releaseForms {
		f.Add([]byte(s))
	}
	for range 64 {
		f.Add(randomMeta(rng))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkAgree(t, data) })
}

// randomName is a directory name near the edges of Longhorn's rule.
func randomName(rng *rand.Rand) string {
	parts := []string{"pvc", "-", "r", "a", "Z", "0", "9", "_", ".", "/", "\x00", "ä", "\n", " ", "--"}
	var b strings.Builder
	for range rng.Intn(6) {
		b.WriteString(parts[rng.Intn(len(parts))])
	}
	suffix := "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	n := 6 + rng.Intn(4)
	if rng.Intn(2) == 0 {
		b.WriteByte('-')
	}
	for range n {
		if rng.Intn(20) == 0 {
			b.WriteString(parts[rng.Intn(len(parts))])
		} else {
			b.WriteByte(suffix[rng.Intn(len(suffix))])
		}
	}
	if rng.Intn(50) == 0 {
		return strings.Repeat("v", 240+rng.Intn(20)) + "-0a1b2c3d"
	}
	return b.String()
}

// checkNameAgree fails t unless the scan's name rule, the guard's volume
// and the inspection's volume agree on name, but for the inspection's
// naming policy for names not of Longhorn's form.
func checkNameAgree(t *testing.T, name string) (valid bool) {
	t.Helper()
	valid = diskscan.ValidDataName(name)
	guard := orphan.VolumeOfDataName(name)
	insp := salvage.VolumeOf(name) // the deprecated wrapper: Inspection.Volume's rule
	switch {
	case valid && (guard == "" || guard != insp || guard+name[len(guard):] != name || len(name)-len(guard) != 9):
		t.Fatalf("%q: a data directory name; the guard's volume %q, the inspection's %q", name, guard, insp)
	case !valid && (guard != "" || insp != name):
		t.Fatalf("%q: not a data directory name; the guard's volume %q (want \"\"), the inspection's %q (want the name)", name, guard, insp)
	}
	return valid
}

// TestScanAndInspectionAgreeOnNames: on random directory names the scan's
// rule and the guard's volume agree, and the inspection names the same
// volume wherever the name is Longhorn's.
func TestScanAndInspectionAgreeOnNames(t *testing.T) {
	rng := rand.New(rand.NewSource(34))
	valid := 0
	const n = 20000
	for range n {
		if checkNameAgree(t, randomName(rng)) {
			valid++
		}
	}
	t.Logf("%d of %d names valid", valid, n)
	if valid < n/20 || valid > n-n/20 {
		t.Fatalf("the generator is one-sided: %d of %d valid", valid, n)
	}
}

// FuzzScanAndInspectionAgreeOnNames is the same property on any name.
func FuzzScanAndInspectionAgreeOnNames(f *testing.F) {
	for _, s := range []string{"", ".", "..", "-12345678", "a-12345678", "a/b-12345678", "a\x00-12345678", "a\nb-12345678",
		"pvc-r-0a1b2c3", "pvc-r-0a1b2c3d.del", strings.Repeat("a", 247) + "-12345678", "ä-12345678", "vol-1234-678"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) { checkNameAgree(t, name) })
}

// TestScanAndInspectionAgreeOnDisk runs the real scan and the real
// inspection (through CopyInventory, as the last-copy guard gets it) over
// directories with random volume.meta: every directory the scan reports
// as a replica has metadata the inspection reads, and every one it skips
// for its volume.meta the inspection refuses for the same reason.
func TestScanAndInspectionAgreeOnDisk(t *testing.T) {
	rng := rand.New(rand.NewSource(341))
	path := filepath.Join(t.TempDir(), "disk")
	if err := diskscantest.NewDisk(path, "disk-1", "uuid-1"); err != nil {
		t.Fatal(err)
	}
	metas := map[string][]byte{}
	for i := range 150 {
		name := fmt.Sprintf("pvc-%03d-r-%08x", i, rng.Uint32())
		metas[name] = randomMeta(rng)
		if err := diskscantest.MakeReplica(path, name, diskscantest.Replica{Meta: metas[name]}); err != nil {
			t.Fatal(err)
		}
	}
	expected := diskscan.NewStaticExpected(diskscan.ReplicaRef{DiskID: "uuid-1", DataDirectoryName: "pvc-kept-r-00000000"})
	orphans, err := diskscan.NewOrphans(expected, diskscan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	orphans.SetDisks(diskscan.Disk{NodeID: "node-1", Name: "disk-1", Path: path, UUID: "uuid-1"})
	rep, err := orphans.Report(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	skipped := map[string]string{}
	for _, s := range rep.Disks[0].Skipped {
		skipped[s.Name] = s.Reason
	}
	snap, err := salvage.CopyInventory{Inner: orphans}.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	replicas := 0
	for _, it := range snap.Items {
		name := it.Param(orphan.ParamDataName)
		replicas++
		if it.Copy == nil {
			t.Fatalf("%s: a replica to the scan, never inspected", name)
		}
		for _, r := range it.Copy.Reasons {
			if strings.HasPrefix(r, string(salvage.ReasonVolumeMeta)) {
				t.Errorf("%s (%s): a replica to the scan, corrupt to the inspection: %s", name, metas[name], r)
			}
		}
		if want := orphan.VolumeOfDataName(name); it.Copy.Volume != want {
			t.Errorf("%s: the guard is told volume %q, the name says %q", name, it.Copy.Volume, want)
		}
	}
	for name, why := range skipped {
		in, err := salvage.Inspect(context.Background(), filepath.Join(path, "replicas", name), salvage.Options{DiskPath: path})
		if err != nil {
			t.Fatal(err)
		}
		if !in.Has(salvage.ReasonVolumeMeta) {
			t.Errorf("%s (%s): skipped by the scan (%s), yet its volume.meta reads to the inspection", name, metas[name], why)
		}
	}
	t.Logf("%d replicas to both, %d skipped by the scan and refused by the inspection", replicas, len(skipped))
	if replicas+len(skipped) != len(metas) || replicas < 15 || len(skipped) < 15 {
		t.Fatalf("%d replicas, %d skipped of %d directories", replicas, len(skipped), len(metas))
	}
}

// inventoryFunc is an orphan.Inventory of one function.
type inventoryFunc func(context.Context) (orphan.Snapshot, error)

func (f inventoryFunc) Scan(ctx context.Context) (orphan.Snapshot, error) { return f(ctx) }

// TestCopyInventoryTellsTheGuardTheNameRule: CopyInventory wraps any
// inventory, not only diskscan's. For a directory whose name is not
// Longhorn's <volume>-<8 letters or digits>, the inspection names the
// volume after the whole name (for Rank), but the guard is told the
// volume is unknown (""), as for an item nobody inspected: before, it was
// told a volume of that name, which a complete volume list does not hold,
// so the last-copy guard took the volume for deleted and let the purge of
// a recoverable copy through.
func TestCopyInventoryTellsTheGuardTheNameRule(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk")
	if err := os.MkdirAll(filepath.Join(disk, "replicas"), 0o755); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{"restored-copy": "", "pvc-1-0a1b2c3d": "pvc-1", "pvc-2-0a1b2c3": ""}
	var items []orphan.Item
	for name := range names {
		write(t, disk, name, threeLayers())
		items = append(items, orphan.Item{Kind: orphan.KindReplicaData, NodeID: "node-1", DataEngine: orphan.DataEngineV1,
			Parameters: map[string]string{orphan.ParamDataName: name, orphan.ParamDiskPath: disk}})
	}
	inner := inventoryFunc(func(context.Context) (orphan.Snapshot, error) { return orphan.Snapshot{Items: items}, nil })
	snap, err := salvage.CopyInventory{Inner: inner}.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range snap.Items {
		name := it.Param(orphan.ParamDataName)
		if it.Copy == nil || !it.Copy.Recoverable || it.Copy.Volume != names[name] {
			t.Errorf("%s: copy %+v, want a recoverable copy of volume %q", name, it.Copy, names[name])
		}
		in, err := salvage.Inspect(context.Background(), filepath.Join(disk, "replicas", name), salvage.Options{DiskPath: disk})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: names[name], false: name}[names[name] != ""]; in.Volume != want {
			t.Errorf("%s: Inspection.Volume %q, want %q", name, in.Volume, want)
		}
	}
}
