package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/examples/internal/cli"
	"github.com/caretaker-storage/caretaker/orphan"
)

// The throw-away disk: what is on it, and why each entry is there.
const (
	qsNode     = "node-1"
	qsDiskName = "disk-1"
	qsDiskUUID = "5c0ffee0-0000-4000-8000-000000000001"
)

type qsEntry struct {
	name     string
	replica  diskscantest.Replica
	expected bool // a replica object of the cluster names it
}

var qsEntries = []qsEntry{
	{name: "pvc-web-8f2c4d1a", replica: diskscantest.Replica{Size: 32 << 20, Written: 4 << 20}, expected: true},   // a healthy replica of a volume in use
	{name: "pvc-db-3b7e9a05", replica: diskscantest.Replica{Size: 16 << 20, Written: 1 << 20}, expected: true},    // a healthy replica of another volume
	{name: "pvc-old-c4a1e7d2", replica: diskscantest.Replica{Size: 64 << 20, Written: 2 << 20}},                   // left behind by a volume deleted while the node was down
	{name: "pvc-moved-0e5d6f7a", replica: diskscantest.Replica{Size: 16 << 20, Written: 512 << 10}},               // left behind by a replica rebuilt elsewhere
	{name: "pvc-stale-7e8f9a0b", replica: diskscantest.Replica{Size: 8 << 20, Written: 256 << 10}},                // left behind too; its node is evicted later
	{name: "pvc-scratch", replica: diskscantest.Replica{}},                                                        // no -<8 characters> suffix
	{name: "pvc-short-1a2b", replica: diskscantest.Replica{}},                                                     // a 4-character suffix
	{name: "pvc-half-9c8b7a6d", replica: diskscantest.Replica{NoMeta: true}},                                      // no volume.meta (a replica whose creation was interrupted?)
	{name: "pvc-torn-5d4c3b2a", replica: diskscantest.Replica{Meta: []byte(`{"Size":1048576,"Head":"volume-he`)}}, // a torn volume.meta
}

// runDiskscan builds a Longhorn-style disk under dir, lets orphan.Monitor
// scan it with diskscan's Orphans, judges, plans and records the orphans
// in a MemStore, then purges one on request through the Sweeper and
// diskscan's Deleter.
func runDiskscan(ctx context.Context, w io.Writer, dir string) error {
	disk := diskscan.Disk{NodeID: qsNode, Name: qsDiskName, Path: filepath.Join(dir, qsDiskName), UUID: qsDiskUUID}
	if err := diskscantest.NewDisk(disk.Path, disk.Name, disk.UUID); err != nil {
		return err
	}
	var refs []diskscan.ReplicaRef
	for _, e := range qsEntries {
		if err := diskscantest.MakeReplica(disk.Path, e.name, e.replica); err != nil {
			return err
		}
		if e.expected {
			refs = append(refs, diskscan.ReplicaRef{Name: e.name + "-r", NodeID: qsNode, DiskID: qsDiskUUID, DiskPath: disk.Path, DataDirectoryName: e.name})
		}
	}
	expected := diskscan.NewStaticExpected(refs...)
	orphans, err := diskscan.NewOrphans(expected, diskscan.Options{Disks: []diskscan.Disk{disk}, ListOwned: true})
	if err != nil {
		return err
	}

	// The Monitor scans in its own goroutine; the fake clock only stamps
	// observations, so the report does not depend on when it runs.
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	observed := make(chan orphan.Observation, 4)
	mon, err := orphan.NewMonitor(orphans, orphan.MonitorOptions{Clock: clk, OnScan: func(o orphan.Observation) { observed <- o }})
	if err != nil {
		return err
	}
	if err := mon.Start(ctx); err != nil {
		return err
	}
	defer mon.Stop()
	next := func() (orphan.Snapshot, error) {
		select {
		case o := <-observed:
			return o.Snapshot, o.Err
		case <-ctx.Done():
			return orphan.Snapshot{}, ctx.Err()
		}
	}
	snap, err := next()
	if err != nil {
		return err
	}
	rep := orphans.LastReport().Disks[0]

	fmt.Fprintf(w, "A Longhorn v1 disk %q with %s in replicas/; the cluster's replica objects expect %d of them.\n",
		qsDiskName, cli.Count(rep.Entries, "entry"), len(refs))
	fmt.Fprintf(w, "Scan (orphan.Monitor running diskscan.Orphans): disk %s\n\n", rep.Status.Health)
	for _, name := range rep.OwnedNames {
		fmt.Fprintf(w, "  owned     %-20s a replica object expects it on this disk\n", name)
	}
	for _, o := range rep.Orphans {
		v, err := orphans.Judge(ctx, o.Item)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %-9s %-20s %s: volume %s, %s allocated (sparse)\n", v.Outcome, o.Name, verdictWhy(v), mib(o.Meta.Size), mib(o.AllocatedBytes))
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "  skipped   %-20s not a replica: %s\n", s.Name, s.Reason)
	}

	store := orphan.NewMemStore()
	sweeper, err := orphan.NewSweeper(store, orphans, orphan.SweeperOptions{Clock: clk})
	if err != nil {
		return err
	}
	// The disk scan speaks for the disk; only the host knows whether the
	// node is down or being evicted, and a node's health dominates its
	// disks'.
	nodeReady := map[orphan.Scope]orphan.ScopeStatus{{NodeID: qsNode}: {Health: orphan.HealthReady}}
	cycle := orphan.Cycle{Selector: orphan.Selector{NodeID: qsNode}, Scopes: nodeReady}
	plan, res, err := sweeper.Reconcile(ctx, snap, cycle)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nPlan (orphan.Decide): %s to create, %d to purge; the store holds %s, marked %s=True.\n",
		cli.Count(len(plan.Create), "orphan record"), len(plan.Purge), cli.Count(len(res.Created), "record"), orphan.ConditionDataCleanable)

	recordOf := func(dataName string) (string, int64, error) {
		for _, o := range orphans.LastReport().Disks[0].Orphans {
			if o.Name == dataName {
				name, err := o.Item.Name()
				return name, o.AllocatedBytes, err
			}
		}
		return "", 0, fmt.Errorf("%s is not an orphan in the last scan", dataName)
	}
	request := func(dataName string) error {
		name, _, err := recordOf(dataName)
		if err != nil {
			return err
		}
		return store.RequestDeletion(ctx, name)
	}
	onDisk := func(dataName string) error {
		_, err := os.Stat(filepath.Join(disk.Path, diskscan.ReplicasDir, dataName, diskscan.MetaFile))
		return err
	}

	// A user deletes the record of pvc-old: a deletion request.
	const victim = "pvc-old-c4a1e7d2"
	_, reclaimed, err := recordOf(victim)
	if err != nil {
		return err
	}
	if err := request(victim); err != nil {
		return err
	}
	plan, res, err = sweeper.Reconcile(ctx, snap, cycle)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Deletion requested for %s; the next sweep plans %d purge:\n", victim, len(plan.Purge))
	fmt.Fprintln(w, "  the Sweeper re-reads the record (still requested, still DataCleanable=True) and re-judges it;")
	fmt.Fprintln(w, "  the Deleter re-checks the disk's UUID and filesystem, the directory, its volume.meta and the")
	fmt.Fprintln(w, "  expected replicas, writes a durable marker, renames it to a tombstone inside replicas/ (os.Root),")
	fmt.Fprintln(w, "  checks again (same type, device and inode; no mount inside), and removes it without crossing a mount.")
	if len(res.Purged) != 1 || len(res.Refused) != 0 {
		return fmt.Errorf("purge: %+v", res)
	}
	if err := onDisk(victim); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s still on disk: %v", victim, err)
	}
	fmt.Fprintf(w, "  purged %s: %s reclaimed\n", victim, mib(reclaimed))

	// A purge that must be refused: the user also asks for pvc-moved, but
	// the cluster schedules a replica onto that very directory first.
	if err := request("pvc-moved-0e5d6f7a"); err != nil {
		return err
	}
	expected.Add(diskscan.ReplicaRef{Name: "pvc-moved-r", NodeID: qsNode, DiskID: qsDiskUUID, DiskPath: disk.Path, DataDirectoryName: "pvc-moved-0e5d6f7a"})
	if snap, err = rescan(mon, next); err != nil {
		return err
	}
	_, res, err = sweeper.Reconcile(ctx, snap, cycle)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Deletion requested for pvc-moved-0e5d6f7a, but a replica now expects it: purged %d, forgotten %d (record dropped, data kept).\n",
		len(res.Purged), len(res.Forgotten))
	if err := onDisk("pvc-moved-0e5d6f7a"); err != nil {
		return fmt.Errorf("pvc-moved was touched: %v", err)
	}

	// The node is being evicted. The disk scan still says Ready, but the
	// node's health dominates: the record is forgotten and the data kept
	// for the eviction to move, even though its deletion was requested.
	const stale = "pvc-stale-7e8f9a0b"
	if err := request(stale); err != nil {
		return err
	}
	evicted := orphan.Cycle{Selector: cycle.Selector, Scopes: map[orphan.Scope]orphan.ScopeStatus{
		{NodeID: qsNode}: {Health: orphan.HealthNodeEvicted, Message: "eviction requested for node " + qsNode}}}
	_, res, err = sweeper.Reconcile(ctx, snap, evicted)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Deletion requested for %s while node %s is being evicted (disk scan: %s): purged %d, forgotten %d; data kept.\n",
		stale, qsNode, snap.Scopes[disk.Scope()].Health, len(res.Purged), len(res.Forgotten))
	if err := onDisk(stale); err != nil || len(res.Purged) != 0 {
		return fmt.Errorf("%s purged on an evicted node: %v %+v", stale, err, res)
	}
	if _, res, err = sweeper.Reconcile(ctx, snap, cycle); err != nil {
		return err
	}
	fmt.Fprintf(w, "Eviction over: the next sweep creates its record again (%d created), waiting for a new request.\n", len(res.Created))

	// The guard. The host reads the replica list from the wrong namespace
	// and gets {"items":[]}: every directory now looks orphaned, and a
	// user (or a script) deletes every orphan record.
	expected.Replace(nil)
	if snap, err = rescan(mon, next); err != nil {
		return err
	}
	if _, _, err = sweeper.Reconcile(ctx, snap, cycle); err != nil {
		return err
	}
	all, err := store.List(ctx, orphan.Selector{NodeID: qsNode})
	if err != nil {
		return err
	}
	for _, r := range all {
		if err := store.RequestDeletion(ctx, r.Name); err != nil {
			return err
		}
	}
	_, res, err = sweeper.Reconcile(ctx, snap, cycle)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "The replica list comes back empty (read from the wrong namespace): %s, all deleted by a user.\n", cli.Count(len(all), "record"))
	fmt.Fprintf(w, "  the guard refuses %s, purges %d:", cli.Count(len(res.Refused), "purge"), len(res.Purged))
	rules := map[string]bool{}
	for _, rf := range res.Refused {
		rule, _, _ := strings.Cut(rf.Reason, ":")
		rules[rule] = true
	}
	for _, rule := range slices.Sorted(maps.Keys(rules)) {
		fmt.Fprintf(w, " %s", rule)
	}
	fmt.Fprintf(w, " (records marked %s=True)\n", orphan.ConditionPurgeGuarded)
	for _, e := range qsEntries {
		if e.expected {
			if err := onDisk(e.name); err != nil {
				return fmt.Errorf("the guard let %s go: %v", e.name, err)
			}
		}
	}
	// The list is right again: what is expected is owned and forgotten.
	expected.Replace(append(refs, diskscan.ReplicaRef{Name: "pvc-moved-r", NodeID: qsNode, DiskID: qsDiskUUID, DiskPath: disk.Path, DataDirectoryName: "pvc-moved-0e5d6f7a"}))
	if snap, err = rescan(mon, next); err != nil {
		return err
	}
	if _, res, err = sweeper.Reconcile(ctx, snap, cycle); err != nil {
		return err
	}
	fmt.Fprintf(w, "The list is right again: %s forgotten (owned); the user's request for the real orphan stands: %d purged.\n",
		cli.Count(len(res.Forgotten), "record"), len(res.Purged))
	if _, err = rescan(mon, next); err != nil {
		return err
	}

	left, err := store.List(ctx, orphan.Selector{})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Records left: %d.", len(left))
	for _, r := range left {
		fmt.Fprintf(w, " %s (%s)", r.Param(orphan.ParamDataName), r.Kind)
	}
	fmt.Fprintf(w, "\nOrphaned data left on %s: %s.\n", qsDiskName, mib(orphans.LastReport().Disks[0].OrphanBytes))
	return nil
}

// rescan asks the Monitor for a new scan and waits for it.
func rescan(mon *orphan.Monitor, next func() (orphan.Snapshot, error)) (orphan.Snapshot, error) {
	mon.Rescan()
	return next()
}

// verdictWhy shortens a verdict's reason for the report: the disk UUID is
// printed once above.
func verdictWhy(v orphan.Verdict) string {
	if v.Outcome == orphan.OutcomeOrphan {
		return "no replica object expects it"
	}
	return v.Reason
}

// mib prints bytes in MiB with one decimal: allocation differs by a few KiB
// between filesystems, the report should not.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
