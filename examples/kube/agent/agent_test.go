package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/caretaker-storage/caretaker/examples/kube/deploy"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
)

// The data directories of the tests: <volume>-<8 alphanumerics>.
const (
	ownedDir   = "pvc-owned-aaaaaaa1"
	orphanDirA = "pvc-lost-bbbbbbb1"
	orphanDirB = "pvc-lost-bbbbbbb2"
)

// TestOrphansAppearAsLonghornWritesThem: the agent creates one Orphan per
// unexpected directory, with Longhorn's name, labels, spec, finalizer and
// conditions, and none for the directory a Replica expects.
func TestOrphansAppearAsLonghornWritesThem(t *testing.T) {
	e := newEnv(t)
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	e.orphanDir(d, orphanDirA)
	e.orphanDir(d, orphanDirB)
	e.startAgent("node-1")

	nameA, nameB := longhornName(d, orphanDirA), longhornName(d, orphanDirB)
	got := e.waitOrphans("node-1", nameA, nameB)

	o := got[nameA]
	wantLabels := map[string]string{
		"longhorn.io/component": "orphan", "longhorn.io/managed-by": "longhorn-manager",
		"longhorn.io/orphan-type": "replica", "longhornnode": "node-1",
	}
	for k, v := range wantLabels {
		if o.GetLabels()[k] != v {
			t.Errorf("label %s = %q, want %q", k, o.GetLabels()[k], v)
		}
	}
	if fs := o.GetFinalizers(); len(fs) != 1 || fs[0] != "longhorn.io" {
		t.Errorf("finalizers = %v, want [longhorn.io]", fs)
	}
	spec := o.Object["spec"].(map[string]any)
	if spec["nodeID"] != "node-1" || spec["orphanType"] != "replica" || spec["dataEngine"] != "v1" {
		t.Errorf("spec = %v", spec)
	}
	wantParams := map[string]string{"DataName": orphanDirA, "DiskName": "disk-1", "DiskPath": d.path, "DiskUUID": d.uuid, "DiskType": "filesystem"}
	params, _, _ := unstructured.NestedStringMap(o.Object, "spec", "parameters")
	if fmt.Sprint(params) != fmt.Sprint(wantParams) {
		t.Errorf("spec.parameters = %v, want %v", params, wantParams)
	}
	if owner, _, _ := unstructured.NestedString(o.Object, "status", "ownerID"); owner != "node-1" {
		t.Errorf("status.ownerID = %q, want node-1", owner)
	}
	if !exists(t, d.dir(ownedDir)) || !exists(t, d.dir(orphanDirA)) || !exists(t, d.dir(orphanDirB)) {
		t.Errorf("the agent removed a directory nobody asked it to remove")
	}
}

// TestDeleteThroughTheAPIPurges: `kubectl delete orphan NAME` removes the
// directory, and then the object; nothing else is touched.
func TestDeleteThroughTheAPIPurges(t *testing.T) {
	e, d, nameA, nameB := newTwoOrphanNode(t)

	// Watch the object: when it goes, its directory must be gone already.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	w := e.watchOrphans(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + nameA})
	e.deleteOrphan(nameA)
	deleted := false
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			eventObject(t, ev)
		}
		if ev.Type == watch.Deleted {
			if exists(t, d.dir(orphanDirA)) {
				t.Fatalf("the Orphan was removed before its directory")
			}
			deleted = true
			break
		}
	}
	if !deleted {
		t.Fatalf("no DELETED event for %s within %s", nameA, waitTimeout)
	}
	e.waitGone(nameA)
	if exists(t, d.dir(orphanDirA)) {
		t.Errorf("%s still exists after its Orphan was deleted", orphanDirA)
	}
	if len(tombstones(t, d)) != 0 {
		t.Errorf("tombstones left: %v", tombstones(t, d))
	}
	if !exists(t, d.dir(ownedDir)) || !exists(t, d.dir(orphanDirB)) {
		t.Errorf("purging %s removed another directory", orphanDirA)
	}
	e.waitOrphans("node-1", nameB)
}

// TestDirectoryRemovedByHandDropsItsOrphan: the next scan forgets it.
func TestDirectoryRemovedByHandDropsItsOrphan(t *testing.T) {
	e, d, nameA, nameB := newTwoOrphanNode(t)

	if err := os.RemoveAll(d.dir(orphanDirA)); err != nil {
		t.Fatal(err)
	}
	e.waitGone(nameA)
	e.waitOrphans("node-1", nameB)
	if !exists(t, d.dir(orphanDirB)) {
		t.Errorf("%s was removed", orphanDirB)
	}
}

// TestDiskEvictionForgetsAndKeepsData: evicting the disk removes its
// Orphans without touching a directory; they come back after.
func TestDiskEvictionForgetsAndKeepsData(t *testing.T) {
	e, d, nameA, nameB := newTwoOrphanNode(t)

	// Watch what the forget does: every object must be marked not
	// cleanable before it goes, so no deletion path could purge it.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	w := e.watchOrphans(ctx, metav1.ListOptions{LabelSelector: "longhornnode=node-1"})
	e.setDiskEviction(d, true)
	e.waitOrphans("node-1")
	marked := map[string]string{}
	for len(marked) < 2 {
		ev, open := <-w.ResultChan()
		if !open {
			t.Fatalf("watch ended with %d of 2 DELETED events", len(marked))
		}
		o := eventObject(t, ev)
		c := condition(o, "DataCleanable")
		if ev.Type == watch.Deleted {
			if c["status"] != "False" {
				t.Fatalf("%s deleted with DataCleanable = %v, want False", o.GetName(), c)
			}
			marked[o.GetName()] = fmt.Sprint(c["reason"])
		}
	}
	for name, reason := range marked {
		if reason != "DiskEvicted" {
			t.Errorf("%s forgotten with reason %q, want DiskEvicted", name, reason)
		}
	}
	for _, dir := range []string{ownedDir, orphanDirA, orphanDirB} {
		if !exists(t, d.dir(dir)) {
			t.Errorf("%s was removed by the eviction", dir)
		}
	}

	e.setDiskEviction(d, false)
	e.waitOrphans("node-1", nameA, nameB)
}

// TestInterruptedPurgeIsFinishedAfterRestart: the agent is SIGKILLed right
// after it renamed a directory to its tombstone, in the middle of removing
// it; the restarted agent removes the tombstone and the Orphan.
func TestInterruptedPurgeIsFinishedAfterRestart(t *testing.T) {
	e := newEnv(t)
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	e.orphanDir(d, orphanDirA)
	e.orphanDir(d, orphanDirB)
	// Enough files that removing them takes far longer than a SIGKILL.
	bulk := filepath.Join(d.dir(orphanDirA), "bulk")
	if err := os.Mkdir(bulk, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 20000 {
		if err := os.WriteFile(filepath.Join(bulk, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	first := e.startAgent("node-1")
	nameA, nameB := longhornName(d, orphanDirA), longhornName(d, orphanDirB)
	e.waitOrphans("node-1", nameA, nameB)

	// Kill the agent the moment the tombstone appears.
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.InotifyAddWatch(fd, filepath.Join(d.path, "replicas"), unix.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	killed := make(chan string, 1)
	go func() {
		defer unix.Close(fd)
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil {
				killed <- "inotify: " + err.Error()
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
				off += unix.SizeofInotifyEvent + int(ev.Len)
				if strings.HasPrefix(name, ".caretaker-purge.") {
					first.kill()
					killed <- ""
					return
				}
			}
		}
	}()
	e.deleteOrphan(nameA)
	if msg := <-killed; msg != "" {
		t.Fatal(msg)
	}

	// The purge is half done: renamed, partly removed, the Orphan still
	// there with its deletion timestamp and finalizer.
	if exists(t, d.dir(orphanDirA)) {
		t.Fatalf("%s still has its name after the rename", orphanDirA)
	}
	if ts := tombstones(t, d); len(ts) != 1 {
		t.Fatalf("tombstones after the kill = %v, want one (the purge finished before the kill?)", ts)
	}
	o, err := e.orphans().Get(context.Background(), nameA, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Orphan is gone though its purge was interrupted: %v", err)
	}
	if o.GetDeletionTimestamp() == nil || len(o.GetFinalizers()) == 0 {
		t.Fatalf("the Orphan after the kill: deletionTimestamp %v, finalizers %v", o.GetDeletionTimestamp(), o.GetFinalizers())
	}

	e.startAgent("node-1")
	e.waitGone(nameA)
	e.waitFor("the tombstone to be removed", func() error {
		if ts := tombstones(t, d); len(ts) > 0 {
			return fmt.Errorf("tombstones %v", ts)
		}
		return nil
	})
	e.waitOrphans("node-1", nameB)
	if !exists(t, d.dir(ownedDir)) || !exists(t, d.dir(orphanDirB)) {
		t.Errorf("the restarted agent removed another directory")
	}
}

// TestTwoAgentsNeverTouchEachOthersOrphans: two nodes with a directory of
// the same name each; each agent writes only its own node's Orphans, and
// a deletion on one node purges nothing on the other.
func TestTwoAgentsNeverTouchEachOthersOrphans(t *testing.T) {
	e := newEnv(t)
	da := e.addNode("node-a", "disk-1")
	db := e.addNode("node-b", "disk-1")
	for _, d := range []disk{da, db} {
		e.owned(d, ownedDir+strings.TrimPrefix(d.node, "node-"))
		e.orphanDir(d, orphanDirA)
		e.orphanDir(d, orphanDirB)
	}
	e.startAgent("node-a")
	e.startAgent("node-b")
	aA, aB := longhornName(da, orphanDirA), longhornName(da, orphanDirB)
	bA, bB := longhornName(db, orphanDirA), longhornName(db, orphanDirB)
	e.waitOrphans("node-a", aA, aB)
	e.waitOrphans("node-b", bA, bB)

	e.deleteOrphan(aA)
	e.waitGone(aA)
	if exists(t, da.dir(orphanDirA)) {
		t.Errorf("node-a's %s survived its Orphan", orphanDirA)
	}
	if !exists(t, db.dir(orphanDirA)) || !exists(t, db.dir(orphanDirB)) {
		t.Errorf("a deletion on node-a removed a directory of node-b")
	}
	e.waitOrphans("node-b", bA, bB)

	// Who wrote what: the API server records every writer of an object.
	for node, names := range map[string][]string{"node-a": {aB}, "node-b": {bA, bB}} {
		for _, name := range names {
			o, err := e.orphans().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if owner, _, _ := unstructured.NestedString(o.Object, "status", "ownerID"); owner != node {
				t.Errorf("%s of %s: ownerID = %q", name, node, owner)
			}
			for _, mf := range o.GetManagedFields() {
				if mf.Manager != "caretaker-orphan-agent-"+node {
					t.Errorf("%s of %s was written by %q", name, node, mf.Manager)
				}
			}
		}
	}
}

// TestDeletingAnUncleanableOrphanKeepsData is Longhorn's rule: an Orphan
// deleted while its DataCleanable condition is not True loses its
// finalizer and its data stays; the next scan records the directory again.
func TestDeletingAnUncleanableOrphanKeepsData(t *testing.T) {
	e := newEnv(t)
	d := e.addNode("node-1", "disk-1")
	e.orphanDir(d, orphanDirA)
	first := e.startAgent("node-1")
	nameA := longhornName(d, orphanDirA)
	before := e.waitOrphans("node-1", nameA)[nameA]
	first.stop()

	// What Longhorn's manager writes when the node is unavailable.
	o := before.DeepCopy()
	conds := []any{map[string]any{"type": "DataCleanable", "status": "False", "reason": "NodeUnavailable",
		"message": "", "lastProbeTime": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}}
	if err := unstructured.SetNestedSlice(o.Object, conds, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.orphans().UpdateStatus(context.Background(), o, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.deleteOrphan(nameA)

	e.startAgent("node-1")
	e.waitFor("the deleted Orphan to be released and recorded again", func() error {
		cur, err := e.orphans().Get(context.Background(), nameA, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.GetUID() == before.GetUID() {
			return fmt.Errorf("still the deleted object (deletionTimestamp %v)", cur.GetDeletionTimestamp())
		}
		return nil
	})
	if !exists(t, d.dir(orphanDirA)) {
		t.Fatalf("%s was purged though its Orphan was not cleanable", orphanDirA)
	}
	e.waitOrphans("node-1", nameA)
}

// TestAutoDeletionPurgesOrphans: with Longhorn's auto-deletion setting
// the agent deletes the Orphans itself, and the directories go.
func TestAutoDeletionPurgesOrphans(t *testing.T) {
	e := newEnv(t)
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	e.orphanDir(d, orphanDirA)
	e.orphanDir(d, orphanDirB)
	e.startAgent("node-1", "-auto-delete=replica-data", "-grace-period=0")
	e.waitFor("both orphan directories to be purged and their Orphans gone", func() error {
		if n := len(e.nodeOrphans("node-1")); n > 0 {
			return fmt.Errorf("%d Orphans left", n)
		}
		for _, dir := range []string{orphanDirA, orphanDirB} {
			if exists(t, d.dir(dir)) {
				return fmt.Errorf("%s still there", dir)
			}
		}
		return nil
	})
	if !exists(t, d.dir(ownedDir)) {
		t.Fatalf("auto-deletion removed the directory a Replica expects")
	}
}

// TestDaemonSetManifestIsValid: the API server accepts deploy/daemonset.yaml
// (a server-side dry run validates it completely and stores nothing).
func TestDaemonSetManifestIsValid(t *testing.T) {
	e := newEnv(t)
	objs, err := kubetest.Objects(deploy.DaemonSet)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].GetKind() != "DaemonSet" {
		t.Fatalf("daemonset.yaml holds %d objects", len(objs))
	}
	if err := kubetest.Create(context.Background(), e.dc, e.ns, true, objs...); err != nil {
		t.Fatal(err)
	}
}
