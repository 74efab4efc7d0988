package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/salvage"
	"github.com/caretaker-storage/caretaker/salvage/salvagetest"
)

// The disk of the last-copy part: four leftover copies of pvc-lost,
// whose volume is faulted and has no backup (one of them never written),
// a leftover of a deleted volume, and a replica the cluster expects.
const (
	lcDiskName = "disk-2"
	lcDiskUUID = "5c0ffee0-0000-4000-8000-000000000002"
	lcVolume   = "pvc-lost"
	lcBest     = "pvc-lost-a1b2c3d4" // the freshest copy: revision counter 42
	lcStale    = "pvc-lost-e5f6a7b8" // an older copy: revision counter 40
	lcBroken   = "pvc-lost-c9d0e1f2" // a copy whose rebuild was interrupted: it holds data the export refuses
	lcEmpty    = "pvc-lost-7f8e9d0c" // a copy created and never written: it holds no data
	lcGone     = "pvc-gone-0a1b2c3d" // the copy of a volume deleted while the node was down
	lcOwned    = "pvc-live-4e5f6a7b" // a replica the cluster expects
)

// lcReplica is a copy of a 16 MiB volume: a snapshot and a head, with
// writes that differ between copies, and a revision counter.
func lcReplica(revision int64, fill byte) salvagetest.Replica {
	return salvagetest.Replica{Size: 16 << 20, Counter: true, Revision: revision,
		Snapshots: []salvagetest.Layer{{Writes: []salvagetest.Write{salvagetest.Block(0, 'a'), salvagetest.Block(100, 'b')}}},
		Head:      salvagetest.Layer{Writes: []salvagetest.Write{salvagetest.Block(1, fill), salvagetest.Block(2000, fill)}}}
}

// runLastCopy shows the last-copy guard: with auto-deletion on, every
// copy of a faulted volume that holds its data is kept, whether the
// export can read it today or not (and a person's delete of one is
// refused too), each record showing what an inspection found; a copy
// proven to hold no data goes. Then the best copy is exported, with its
// SHA-256.
func runLastCopy(ctx context.Context, w io.Writer, dir string) error {
	disk := diskscan.Disk{NodeID: qsNode, Name: lcDiskName, Path: filepath.Join(dir, lcDiskName), UUID: lcDiskUUID}
	if err := diskscantest.NewDisk(disk.Path, disk.Name, disk.UUID); err != nil {
		return err
	}
	best := lcReplica(42, 'z')
	broken := lcReplica(43, 'y')
	broken.Rebuilding = true
	copies := []struct {
		name string
		r    salvagetest.Replica
	}{{lcBest, best}, {lcStale, lcReplica(40, 'x')}, {lcBroken, broken}, {lcGone, lcReplica(7, 'g')},
		{lcEmpty, salvagetest.Replica{Size: 16 << 20, Counter: true}}}
	for _, c := range copies {
		if err := salvagetest.WriteReplica(filepath.Join(disk.Path, diskscan.ReplicasDir, c.name), c.r); err != nil {
			return err
		}
	}
	if err := diskscantest.MakeReplica(disk.Path, lcOwned, diskscantest.Replica{Size: 16 << 20, Written: 1 << 20}); err != nil {
		return err
	}
	expected := diskscan.NewStaticExpected(diskscan.ReplicaRef{Name: lcOwned + "-r", NodeID: qsNode, DiskID: lcDiskUUID, DiskPath: disk.Path, DataDirectoryName: lcOwned})
	inner, err := diskscan.NewOrphans(expected, diskscan.Options{Disks: []diskscan.Disk{disk}})
	if err != nil {
		return err
	}
	// Each orphaned directory is inspected, read-only, as a copy of its
	// volume, and the copies of a volume are ranked.
	adapter, err := salvage.WithCopies(inner, salvage.Options{})
	if err != nil {
		return err
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 13, 0, 0, 0, time.UTC))
	store := orphan.NewMemStore()
	sweeper, err := orphan.NewSweeper(store, adapter, orphan.SweeperOptions{Clock: clk})
	if err != nil {
		return err
	}
	// Auto-deletion of replica data is on, with no grace period. The host
	// passes every volume's state (Longhorn's robustness) and says the list
	// is complete: pvc-gone has no Volume, so it is deleted.
	cycle := orphan.Cycle{Selector: orphan.Selector{NodeID: qsNode},
		Scopes:          map[orphan.Scope]orphan.ScopeStatus{{NodeID: qsNode}: {Health: orphan.HealthReady}},
		Policy:          orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}},
		Volumes:         map[string]orphan.VolumeState{lcVolume: orphan.VolumeFaulted, "pvc-live": orphan.VolumeHealthy},
		VolumesComplete: true}
	fmt.Fprintf(w, "Volume %s is faulted and has no backup. Disk %q holds four leftover copies of it (one never\n", lcVolume, lcDiskName)
	fmt.Fprintln(w, "written), a leftover of the deleted volume pvc-gone, and a replica the cluster expects. Auto-deletion")
	fmt.Fprintln(w, "of replica data is on.")

	sweep := func() (orphan.Result, error) {
		snap, err := adapter.Scan(ctx)
		if err != nil {
			return orphan.Result{}, err
		}
		_, res, err := sweeper.Reconcile(ctx, snap, cycle)
		return res, err
	}
	// The first sweep records the orphans (cleanable); the second is the
	// first whose auto-deletion is due.
	if _, err := sweep(); err != nil {
		return err
	}
	recs, err := store.List(ctx, orphan.Selector{NodeID: qsNode})
	if err != nil {
		return err
	}
	dataOf := map[string]string{}  // record name → data directory
	verdict := map[string]string{} // record name → its first verdict
	for _, r := range recs {
		dataOf[r.Name] = r.Param(orphan.ParamDataName)
		if c := meta.FindStatusCondition(r.Conditions, orphan.ConditionRecoverable); c != nil {
			verdict[r.Name] = c.Reason
			if _, why, ok := strings.Cut(c.Message, "holds data the tool cannot export today: "); ok {
				why, _, _ = strings.Cut(why, " (")
				verdict[r.Name] += ": " + why
			}
		}
	}
	res, err := sweep()
	if err != nil {
		return err
	}
	if recs, err = store.List(ctx, orphan.Selector{NodeID: qsNode}); err != nil {
		return err
	}
	// Record names hash the disk's path (a temporary directory): print in
	// data directory order.
	slices.SortFunc(recs, func(a, b orphan.Record) int {
		return strings.Compare(a.Param(orphan.ParamDataName), b.Param(orphan.ParamDataName))
	})
	byData := func(a, b string) int { return strings.Compare(dataOf[a], dataOf[b]) }
	slices.SortFunc(res.Purged, byData)
	slices.SortFunc(res.Refused, func(a, b orphan.Refusal) int { return byData(a.Name, b.Name) })
	fmt.Fprintln(w, "\nAfter two sweeps. The records the store keeps (kept), the data purged (purged), and the")
	fmt.Fprintln(w, "second sweep's refusals (Result.Refused: each due purge the guard held back, with its reason):")
	for _, r := range recs {
		c := meta.FindStatusCondition(r.Conditions, orphan.ConditionRecoverable)
		if c == nil {
			return fmt.Errorf("record of %s has no %s condition", dataOf[r.Name], orphan.ConditionRecoverable)
		}
		guard := "-"
		if g := meta.FindStatusCondition(r.Conditions, orphan.ConditionPurgeGuarded); g != nil && g.Status == "True" {
			guard = g.Reason
		}
		fmt.Fprintf(w, "  kept    %-18s %s=%s %-15s PurgeGuarded: %s\n", dataOf[r.Name], orphan.ConditionRecoverable, c.Status, c.Reason, guard)
	}
	for _, n := range res.Purged {
		why := verdict[n]
		switch why {
		case orphan.ReasonRecoverable:
			why += ", of a deleted volume"
		case orphan.ReasonNoData:
			why += ": it holds none of the volume's data"
		}
		fmt.Fprintf(w, "  purged  %-18s %s\n", dataOf[n], why)
	}
	for _, rf := range res.Refused {
		rule, why, _ := strings.Cut(rf.Reason, ": ")
		why, _, _ = strings.Cut(why, "; ")
		fmt.Fprintf(w, "  refused %-18s %s: %s\n", dataOf[rf.Name], rule, why)
		// The refusal ends with what the copy holds: data the export can
		// read, or data it cannot read today (and why).
		if i := strings.LastIndex(rf.Reason, "; the copy holds "); i >= 0 {
			holds := rf.Reason[i+2:]
			if head, reasons, ok := strings.Cut(holds, ": "); ok {
				kind, _, _ := strings.Cut(reasons, ":")
				holds = head + ": " + kind
			}
			fmt.Fprintf(w, "%30s(%s)\n", "", holds)
		}
	}
	for _, c := range copies[:3] {
		if _, err := os.Stat(filepath.Join(disk.Path, diskscan.ReplicasDir, c.name)); err != nil {
			return fmt.Errorf("the last-copy guard let %s go: %v", c.name, err)
		}
	}

	// What the best copy's record says: the verdict and the reuse hint.
	var bestRec orphan.Record
	for _, r := range recs {
		if r.Param(orphan.ParamDataName) == lcBest {
			bestRec = r
		}
	}
	c := meta.FindStatusCondition(bestRec.Conditions, orphan.ConditionRecoverable)
	fmt.Fprintf(w, "\n%s's record, condition %s (%s):\n  %s\n", lcBest, orphan.ConditionRecoverable, c.Reason,
		strings.ReplaceAll(strings.ReplaceAll(c.Message, disk.Path, "<disk>"), "; ", ";\n  "))

	// A person deletes the best copy's record: refused too, without an
	// explicit override (Cycle.LastCopyOverride).
	if err := store.RequestDeletion(ctx, bestRec.Name); err != nil {
		return err
	}
	if res, err = sweep(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nA user deletes the record of %s: purged %d, refused %d (%s).\n", lcBest, len(res.Purged), len(res.Refused), ruleOf(res, bestRec.Name))
	if others := len(res.Refused) - 1; others > 0 {
		fmt.Fprintf(w, "  (One refusal is the user's request; the other %d are the automatic purges of the other copies,\n"+
			"  due again in this sweep and held back again: every sweep reports each purge it refuses.)\n", others)
	}

	// Salvage: inspect and rank the copies, export the best one.
	var ins []*salvage.Inspection
	for _, c := range copies[:2] {
		in, err := salvage.Inspect(ctx, filepath.Join(disk.Path, diskscan.ReplicasDir, c.name), salvage.Options{})
		if err != nil {
			return err
		}
		ins = append(ins, in)
	}
	var pick *salvage.Inspection
	for i, rk := range salvage.Rank(ins) {
		if rk.Rank == 1 {
			pick = ins[i]
		}
	}
	if pick == nil {
		return errors.New("no recoverable copy ranked first")
	}
	out := filepath.Join(dir, "pvc-lost.img")
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	in, exp, err := salvage.Recover(ctx, pick.Dir, f, salvage.RecoverOptions{})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	want := sha256.Sum256(best.Image())
	fmt.Fprintf(w, "Salvage (salvage.Rank, salvage.Recover): the best copy is %s (revision counter %d);\n", filepath.Base(in.Dir), in.Revision)
	fmt.Fprintf(w, "  exported %s to pvc-lost.img, sha256 %s\n", mib(exp.Size), hex.EncodeToString(exp.SHA256[:]))
	if exp.SHA256 != want {
		return fmt.Errorf("the image's SHA-256 %x is not the volume's data as written (%x)", exp.SHA256, want)
	}
	fmt.Fprintln(w, "  the image is the volume's data as written to that copy, block for block.")
	return nil
}

// ruleOf is the guard rule that refused record's purge in res.
func ruleOf(res orphan.Result, record string) string {
	for _, rf := range res.Refused {
		if rf.Name == record {
			rule, _, _ := strings.Cut(rf.Reason, ":")
			return rule
		}
	}
	return "not refused"
}
