package diskscan

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/orphan"
)

func TestPurgeRemovesDirectory(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	f := newFixture(t, d)
	lost := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{Size: 4 << 20, Written: 1 << 20})
	kept := replica(t, d, "pvc-kept-r-00000001", disktest.Replica{})
	f.expect(d, "pvc-kept-r-00000001")
	if got := orphanNames(f.scan().Disks[0]); !equalStrings(got, []string{"pvc-lost-r-deadbeef"}) {
		t.Fatalf("orphans %v", got)
	}
	ctx := context.Background()
	if err := f.o.Delete(ctx, record(t, d, "pvc-lost-r-deadbeef")); err != nil {
		t.Fatal(err)
	}
	if exists(t, lost) || !exists(t, kept) {
		t.Fatalf("lost exists %v, kept exists %v", exists(t, lost), exists(t, kept))
	}
	entries, _ := os.ReadDir(filepath.Join(d.Path, ReplicasDir))
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	if got := orphanNames(f.scan().Disks[0]); len(got) != 0 {
		t.Errorf("orphans after purge %v", got)
	}
	// Already gone is success.
	if err := f.o.Delete(ctx, record(t, d, "pvc-lost-r-deadbeef")); err != nil {
		t.Errorf("second delete: %v", err)
	}
}

// Every refusal deletes nothing and says why.
func TestPurgeRefusals(t *testing.T) {
	type setup struct {
		f       *fixture
		d       Disk
		rec     orphan.Record
		protect []string // paths that must survive
	}
	cases := []struct {
		name    string
		prepare func(t *testing.T, s *setup)
		want    error
	}{
		{"name ..", func(t *testing.T, s *setup) { s.rec.Parameters[orphan.ParamDataName] = ".." }, ErrUnsafePath},
		{"name .", func(t *testing.T, s *setup) { s.rec.Parameters[orphan.ParamDataName] = "." }, ErrUnsafePath},
		{"empty name", func(t *testing.T, s *setup) { s.rec.Parameters[orphan.ParamDataName] = "" }, ErrUnsafePath},
		{"name with slash", func(t *testing.T, s *setup) {
			s.rec.Parameters[orphan.ParamDataName] = "../../n-d/replicas/pvc-lost-r-deadbeef"
		}, ErrUnsafePath},
		{"name without suffix", func(t *testing.T, s *setup) {
			replica(t, s.d, "nosuffixatall", disktest.Replica{})
			s.rec.Parameters[orphan.ParamDataName] = "nosuffixatall"
			s.protect = append(s.protect, filepath.Join(s.d.Path, ReplicasDir, "nosuffixatall"))
		}, ErrNotReplica},
		{"symlink to another disk", func(t *testing.T, s *setup) {
			other := makeDisk(t, t.TempDir(), "m", "x", "ux")
			target := replica(t, other, "pvc-victim-r-11111111", disktest.Replica{})
			must(t, os.Symlink(target, filepath.Join(s.d.Path, ReplicasDir, "pvc-link-r-22222222")))
			s.rec.Parameters[orphan.ParamDataName] = "pvc-link-r-22222222"
			s.protect = append(s.protect, target, filepath.Join(target, MetaFile), filepath.Join(s.d.Path, ReplicasDir, "pvc-link-r-22222222"))
		}, ErrNotReplica},
		{"symlink to /", func(t *testing.T, s *setup) {
			must(t, os.Symlink("/", filepath.Join(s.d.Path, ReplicasDir, "pvc-root-r-33333333")))
			s.rec.Parameters[orphan.ParamDataName] = "pvc-root-r-33333333"
			s.protect = append(s.protect, "/etc/passwd", filepath.Join(s.d.Path, ReplicasDir, "pvc-root-r-33333333"))
		}, ErrNotReplica},
		{"meta missing", func(t *testing.T, s *setup) {
			must(t, os.Remove(filepath.Join(s.d.Path, ReplicasDir, "pvc-lost-r-deadbeef", MetaFile)))
		}, ErrNotReplica},
		{"meta oversized", func(t *testing.T, s *setup) {
			must(t, disktest.WriteMeta(filepath.Join(s.d.Path, ReplicasDir, "pvc-lost-r-deadbeef"), make([]byte, DefaultMaxMetaSize+1)))
		}, ErrNotReplica},
		{"expected", func(t *testing.T, s *setup) { s.f.expect(s.d, "pvc-lost-r-deadbeef") }, ErrStillExpected},
		{"disk UUID rewritten", func(t *testing.T, s *setup) { must(t, disktest.WriteConfig(s.d.Path, "d", "new-uuid")) }, ErrDiskChanged},
		{"config gone", func(t *testing.T, s *setup) { must(t, os.Remove(filepath.Join(s.d.Path, ConfigFile))) }, ErrDiskInvalid},
		{"record of another disk UUID", func(t *testing.T, s *setup) { s.rec.Parameters[orphan.ParamDiskUUID] = "old-uuid" }, ErrDiskChanged},
		{"record of another path", func(t *testing.T, s *setup) { s.rec.Parameters[orphan.ParamDiskPath] = "/elsewhere" }, ErrDiskChanged},
		{"unknown disk", func(t *testing.T, s *setup) { s.rec.Parameters[orphan.ParamDiskName] = "nope" }, ErrUnknownDisk},
		{"host expects another filesystem", func(t *testing.T, s *setup) {
			s.d.FSID = "00000000beef"
			must(t, s.f.o.SetDisks(s.d))
		}, ErrDiskChanged},
		{"filesystem never seen", func(t *testing.T, s *setup) {
			// A new Orphans: nothing scanned, no host FSID, so nothing proves
			// the disk is the one the record was made on.
			s.f.o = newOrphans(t, s.f.exp, Options{}, s.d)
		}, ErrDiskChanged},
		{"v2 record", func(t *testing.T, s *setup) { s.rec.DataEngine = orphan.DataEngineV2 }, ErrNotReplica},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := makeDisk(t, t.TempDir(), "n", "d", "u")
			lost := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{})
			s := &setup{f: newFixture(t, d), d: d}
			s.f.scan() // pins the filesystem ID
			s.rec = record(t, d, "pvc-lost-r-deadbeef")
			s.protect = []string{lost}
			c.prepare(t, s)
			err := s.f.o.Delete(context.Background(), s.rec)
			if !errors.Is(err, orphan.ErrPreconditionFailed) || !errors.Is(err, c.want) {
				t.Fatalf("Delete: %v; want ErrPreconditionFailed and %v", err, c.want)
			}
			for _, p := range s.protect {
				if !exists(t, p) {
					t.Errorf("%s was deleted", p)
				}
			}
			entries, _ := os.ReadDir(filepath.Join(d.Path, ReplicasDir))
			for _, e := range entries {
				if isTombstone(e.Name()) {
					t.Errorf("tombstone left: %s", e.Name())
				}
			}
		})
	}
}

// A tmpfs mounted over the disk path, with a copy of the disk's config and
// the orphan's name in it, is a different disk: the scope is DiskChanged
// and the purge is refused; after unmounting, the original is intact.
func TestPurgeRefusedOnOtherFilesystem(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	lost := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{})
	f := newFixture(t, d)
	if rep := f.scan().Disks[0]; rep.Status.Health != orphan.HealthReady || len(rep.Orphans) != 1 {
		t.Fatalf("before mount: %+v", rep)
	}
	before, _ := FSID(d.Path)
	func() {
		defer mountTmpfs(t, d.Path)()
		must(t, disktest.NewDisk(d.Path, "d", "u"))
		decoy := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{})
		after, _ := FSID(d.Path)
		if after == before {
			t.Fatalf("tmpfs has the same filesystem ID %s", after)
		}
		rep := f.scan().Disks[0]
		if rep.Status.Health != orphan.HealthDiskChanged || !strings.Contains(rep.Status.Message, before) || len(rep.Orphans) != 0 {
			t.Fatalf("on tmpfs: %+v", rep.Status)
		}
		err := f.o.Delete(context.Background(), record(t, d, "pvc-lost-r-deadbeef"))
		if !errors.Is(err, orphan.ErrPreconditionFailed) || !errors.Is(err, ErrDiskChanged) {
			t.Fatalf("Delete on tmpfs: %v", err)
		}
		if !exists(t, decoy) {
			t.Fatal("the decoy on tmpfs was deleted")
		}
		if err := f.o.FinishInterrupted(context.Background()); err != nil {
			t.Fatalf("FinishInterrupted on a changed disk: %v", err)
		}
	}()
	if !exists(t, filepath.Join(lost, MetaFile)) {
		t.Fatal("original data gone")
	}
	if rep := f.scan().Disks[0]; rep.Status.Health != orphan.HealthReady || len(rep.Orphans) != 1 {
		t.Fatalf("after unmount: %+v", rep)
	}
}

// The race the second expected check guards: a replica claims the
// directory after the checks but before the removal.
func TestPurgeRefusedWhenExpectedAfterRename(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	lost := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{Size: 2 << 20, Written: 8 << 10})
	f := newFixture(t, d)
	f.expect(d, "pvc-live-r-00000001")
	f.scan()
	var sawTombstone bool
	f.o.hooks.afterTombstone = func(replicas, tomb string) {
		sawTombstone = exists(t, filepath.Join(replicas, tomb)) && !exists(t, lost)
		f.expect(d, "pvc-lost-r-deadbeef") // the cluster schedules a replica onto it
	}
	err := f.o.Delete(context.Background(), record(t, d, "pvc-lost-r-deadbeef"))
	if !errors.Is(err, orphan.ErrPreconditionFailed) || !errors.Is(err, ErrStillExpected) {
		t.Fatalf("Delete: %v", err)
	}
	if !sawTombstone {
		t.Fatal("the hook did not run with the directory renamed")
	}
	if _, err := ReadVolumeMeta(mustOpen(t, filepath.Join(lost, MetaFile)), 0); err != nil {
		t.Fatalf("data not restored intact: %v", err)
	}
	fi, err := os.Stat(filepath.Join(lost, "volume-head-000.img"))
	if err != nil || fi.Size() != 2<<20 {
		t.Fatalf("head image: %v %v", fi, err)
	}
	if rep := f.scan().Disks[0]; rep.Owned != 1 || len(rep.Skipped) != 0 {
		t.Fatalf("after: %+v", rep)
	}
}

// FinishInterrupted removes tombstones and only its own tombstones; one
// whose original name became expected meanwhile is restored. A symbolic
// link named like a tombstone (which the old code removed as one) is
// reported and kept.
func TestFinishInterrupted(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	f := newFixture(t, d)
	rd := filepath.Join(d.Path, ReplicasDir)
	replica(t, d, "pvc-lost-r-00000001", disktest.Replica{})
	replica(t, d, "pvc-back-r-00000002", disktest.Replica{})
	keep := replica(t, d, "pvc-keep-r-00000003", disktest.Replica{})
	plantTombstone(t, d, "pvc-lost-r-00000001")
	plantTombstone(t, d, "pvc-back-r-00000002")
	outside := filepath.Join(t.TempDir(), "outside")
	must(t, os.Mkdir(outside, 0o755))
	t3 := purge{name: "pvc-link-r-00000004", token: "0123456789abcdef"}.tombstone()
	must(t, os.Symlink(outside, filepath.Join(rd, t3)))
	f.expect(d, "pvc-back-r-00000002", "pvc-keep-r-00000003")
	f.scan()
	err := f.o.FinishInterrupted(context.Background())
	if !errorsIs(err, orphan.ErrPreconditionFailed, ErrForeignTombstone) || !strings.Contains(err.Error(), t3) {
		t.Fatalf("FinishInterrupted: %v, want the symlink reported", err)
	}
	var names []string
	entries, _ := os.ReadDir(rd)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !equalStrings(names, []string{t3, "pvc-back-r-00000002", "pvc-keep-r-00000003"}) {
		t.Fatalf("left %v", names)
	}
	if !exists(t, outside) || !exists(t, filepath.Join(keep, MetaFile)) {
		t.Fatal("deleted something that is not a tombstone")
	}
}

// The subprocess side of TestPurgeKilledMidway: purge one directory and
// stop dead once it is a half-removed tombstone.
func purgeChild() {
	var d Disk
	if err := json.Unmarshal([]byte(os.Getenv("DISKSCAN_PURGE_CHILD")), &d); err != nil {
		panic(err)
	}
	live := ReplicaRef{DiskID: d.UUID, DataDirectoryName: "pvc-keep-r-00000001"}
	o, err := NewOrphans(NewStaticExpected(live), Options{Disks: []Disk{d}})
	if err != nil {
		panic(err)
	}
	o.hooks.afterTombstone = func(replicas, tomb string) {
		// Remove about half the files, as an interrupted RemoveAll would,
		// then tell the parent and wait to be killed.
		entries, _ := os.ReadDir(filepath.Join(replicas, tomb))
		for _, e := range entries[:len(entries)/2] {
			os.Remove(filepath.Join(replicas, tomb, e.Name()))
		}
		fmt.Println("TOMBSTONE", tomb)
		select {}
	}
	rec, _ := orphan.NewRecord(dataItem(d, "pvc-lost-r-deadbeef"), testTime)
	err = o.Delete(context.Background(), rec)
	fmt.Println("RETURNED", err)
	os.Exit(3)
}

func TestPurgeKilledMidway(t *testing.T) {
	if os.Getenv("DISKSCAN_PURGE_CHILD") != "" {
		purgeChild()
		return
	}
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	lost := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{})
	for i := range 500 {
		writeFile(t, filepath.Join(lost, fmt.Sprintf("volume-snap-s%03d.img", i)), "data")
	}
	keep := replica(t, d, "pvc-keep-r-00000001", disktest.Replica{})
	d.FSID, _ = FSID(d.Path)
	arg, _ := json.Marshal(d)

	cmd := exec.Command(os.Args[0], "-test.run=^TestPurgeKilledMidway$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DISKSCAN_PURGE_CHILD="+string(arg))
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "TOMBSTONE ") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child said %q, %v", line, err)
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	go io.Copy(io.Discard, out)
	if err := cmd.Wait(); err == nil {
		t.Fatal("child exited cleanly")
	}
	tomb := filepath.Join(d.Path, ReplicasDir, strings.TrimSpace(strings.TrimPrefix(line, "TOMBSTONE ")))
	if exists(t, lost) || !exists(t, tomb) {
		t.Fatalf("after the kill: original exists %v, tombstone exists %v", exists(t, lost), exists(t, tomb))
	}

	// The next sweep: the scan shows no orphan, FinishInterrupted finishes.
	f := newFixture(t, d)
	f.expect(d, "pvc-keep-r-00000001")
	rep := f.scan().Disks[0]
	if len(rep.Orphans) != 0 || !strings.Contains(skippedReasons(rep)[filepath.Base(tomb)], "purge in progress") {
		t.Fatalf("scan of the interrupted purge: %+v", rep)
	}
	must(t, f.o.FinishInterrupted(context.Background()))
	entries, _ := os.ReadDir(filepath.Join(d.Path, ReplicasDir))
	if len(entries) != 1 || entries[0].Name() != "pvc-keep-r-00000001" || !exists(t, filepath.Join(keep, MetaFile)) {
		t.Fatalf("left %v", entries)
	}
}

// Permission denied inside one directory: root ignores permissions, so
// the scan runs in a child process as an unprivileged user.
func TestScanPermissionDenied(t *testing.T) {
	if os.Getenv("DISKSCAN_PERM_CHILD") != "" {
		permChild()
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to start a child as another user; as a normal user chmod 000 would do, but then this test is not needed")
	}
	base := t.TempDir()
	for p := base; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		must(t, os.Chmod(p, 0o755))
	}
	d := makeDisk(t, base, "n", "d", "u")
	replica(t, d, "pvc-open-r-00000001", disktest.Replica{})
	locked := replica(t, d, "pvc-locked-r-00000002", disktest.Replica{})
	must(t, os.Chmod(locked, 0o000))
	bin := filepath.Join(base, "diskscan.test")
	copyFile(t, os.Args[0], bin)
	d.FSID, _ = FSID(d.Path)
	arg, _ := json.Marshal(d)
	cmd := exec.Command(bin, "-test.run=^TestScanPermissionDenied$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DISKSCAN_PERM_CHILD="+string(arg))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var got struct {
		Health  orphan.Health
		Orphans []string
		Skipped map[string]string
		Purge   string
	}
	if err := json.Unmarshal(out[strings.LastIndex(string(out[:len(out)-1]), "\n")+1:], &got); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	if got.Health != orphan.HealthReady || !equalStrings(got.Orphans, []string{"pvc-open-r-00000001"}) ||
		!strings.Contains(got.Skipped["pvc-locked-r-00000002"], "permission denied") {
		t.Fatalf("child saw %+v", got)
	}
	if got.Purge == "" || !exists(t, locked) {
		t.Fatalf("purge of the unreadable directory: %q, exists %v", got.Purge, exists(t, locked))
	}
	must(t, os.Chmod(locked, 0o755))
}

func permChild() {
	var d Disk
	if err := json.Unmarshal([]byte(os.Getenv("DISKSCAN_PERM_CHILD")), &d); err != nil {
		panic(err)
	}
	o, err := NewOrphans(NewStaticExpected(), Options{Disks: []Disk{d}})
	if err != nil {
		panic(err)
	}
	rep, err := o.Report(context.Background())
	if err != nil {
		panic(err)
	}
	dr := rep.Disks[0]
	rec, _ := orphan.NewRecord(dataItem(d, "pvc-locked-r-00000002"), testTime)
	perr := o.Delete(context.Background(), rec)
	purge := ""
	if perr != nil {
		purge = perr.Error()
	}
	out, _ := json.Marshal(map[string]any{"Health": dr.Status.Health, "Orphans": orphanNames(dr), "Skipped": skippedReasons(dr), "Purge": purge})
	fmt.Printf("\n%s\n", out)
	os.Exit(0)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	must(t, err)
	must(t, os.WriteFile(to, data, 0o755))
}

func mustOpen(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.Open(p)
	must(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// FinishInterrupted runs on every sync, so it must not read a large
// replicas directory again when the last listing found no tombstone; but
// it must look when nothing has listed the disk yet (a restart after a
// crash) or when one of our own purges failed to remove its tombstone.
func TestFinishInterruptedLooksOnlyWhereTombstonesMayBe(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	f := newFixture(t, d)
	f.expect(d, "pvc-live-r-0000000f")
	plant := func(name string) string {
		t.Helper()
		replica(t, d, name, disktest.Replica{})
		tomb, _ := plantTombstone(t, d, name)
		return tomb
	}
	finish := func() { t.Helper(); must(t, f.o.FinishInterrupted(context.Background())) }

	// Nothing has listed the disk yet: a crash may have left a tombstone.
	first := plant("pvc-a-r-00000001")
	f.scan() // pins the filesystem ID; the listing sees the tombstone
	finish()
	if exists(t, first) {
		t.Fatalf("a tombstone seen by the scan was left behind")
	}

	// A clean listing: a tombstone planted behind our back afterwards is
	// not looked for (no directory read), until the next scan sees it.
	f.scan()
	sneaky := plant("pvc-b-r-00000002")
	finish()
	if !exists(t, sneaky) {
		t.Fatalf("FinishInterrupted read the directory although the last listing was clean")
	}
	f.scan()
	finish()
	if exists(t, sneaky) {
		t.Fatalf("the tombstone the scan saw was not finished")
	}

	// Our own purge that left a tombstone marks the disk without a scan.
	f.scan()
	left := plant("pvc-c-r-00000003")
	f.o.disks.markTombstone(d)
	finish()
	if exists(t, left) {
		t.Fatalf("a tombstone our own purge left was not finished")
	}

	// A new process (a new Orphans) knows nothing and looks.
	f.scan()
	again := plant("pvc-d-r-00000004")
	g := newFixture(t, d)
	g.expect(d, "pvc-live-r-0000000f")
	g.scan() // pins the filesystem ID, and sees the tombstone
	must(t, g.o.FinishInterrupted(context.Background()))
	if exists(t, again) {
		t.Fatalf("a fresh Orphans did not look for tombstones")
	}
}

// A listing that started before one of our purges left a tombstone must not
// mark the disk clean when it finishes.
func TestSawTombstonesIgnoresListingsOlderThanAMark(t *testing.T) {
	d := Disk{NodeID: "n", Name: "d", Path: "/x", UUID: "u"}
	var s diskSet
	must(t, s.set([]Disk{d}))
	if !s.mayHoldTombstones(d) {
		t.Fatalf("an unlisted disk counts as clean")
	}
	marks := s.tombMarks(d)
	s.markTombstone(d) // a purge fails while the listing runs
	s.sawTombstones(d, false, marks)
	if !s.mayHoldTombstones(d) {
		t.Fatalf("a listing older than the mark cleared it")
	}
	s.sawTombstones(d, false, s.tombMarks(d))
	if s.mayHoldTombstones(d) {
		t.Fatalf("a fresh clean listing did not clear the mark")
	}
	moved := d
	moved.Path = "/y"
	if !s.mayHoldTombstones(moved) {
		t.Fatalf("a disk at a new path counts as clean")
	}
}
