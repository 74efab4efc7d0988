package orphanctrl_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/caretaker-storage/caretaker/examples/controller-runtime/orphanctrl"
	"github.com/caretaker-storage/caretaker/orphan"
)

// recoverableDir writes a Longhorn v1 replica directory, in the engine's
// format, that an inspection finds recoverable.
func (e *env) recoverableDir(d disk, dataName string, revision int64) {
	e.lh.RecoverableDir(d, dataName, revision)
}

// setVolume creates or updates the Longhorn Volume name with
// status.robustness.
func (e *env) setVolume(name, robustness string) { e.lh.SetVolume(name, robustness) }

func conditionOf(o *orphanctrl.Orphan, typ string) (status, reason, message string) {
	for _, c := range o.Status.Conditions {
		if c.Type == typ {
			return c.Status, c.Reason, c.Message
		}
	}
	return "", "", ""
}

// TestLastCopyOfAFaultedVolumeIsNeverAutoPurged: with auto-deletion on,
// the recoverable orphan of a faulted volume stays, and its Orphan shows
// the refusal (PurgeGuarded=True, LastCopy) and the verdict
// (Recoverable=True, Reusable, with the reuse hint); the orphan of a
// deleted volume (no Volume object, the cache's list complete) is purged.
// Once the volume is healthy again, its orphan goes too.
func TestLastCopyOfAFaultedVolumeIsNeverAutoPurged(t *testing.T) {
	const (
		faultedDir = "pvc-faulted-ccccccc1"
		goneDir    = "pvc-gone-ddddddd1"
	)
	e := newEnv(t)
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	e.setVolume("pvc-faulted", "faulted")
	e.recoverableDir(d, faultedDir, 9)
	e.recoverableDir(d, goneDir, 4)
	faulted, gone := longhornName(d, faultedDir), longhornName(d, goneDir)
	e.start("node-1", manager.Options{}, func(_ manager.Manager, cfg *orphanctrl.Config) {
		cfg.Policy = orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}
	})

	e.waitFor("the deleted volume's orphan to be purged", func() error {
		if exists(t, d.Dir(goneDir)) {
			return errors.New(goneDir + " still there")
		}
		if _, ok := e.nodeOrphans("node-1")[gone]; ok {
			return errors.New("its Orphan is still there")
		}
		return nil
	})
	e.waitFor("the faulted volume's orphan to show the refusal and the verdict", func() error {
		o, ok := e.nodeOrphans("node-1")[faulted]
		if !ok {
			return errors.New("no Orphan")
		}
		gs, gr, gm := conditionOf(o, "PurgeGuarded")
		rs, rr, rm := conditionOf(o, "Recoverable")
		switch {
		case gs != "True" || gr != "LastCopy" || !strings.Contains(gm, "volume pvc-faulted, which is faulted"):
			return fmt.Errorf("PurgeGuarded = %s %s %q", gs, gr, gm)
		case rs != "True" || rr != "Reusable":
			return fmt.Errorf("Recoverable = %s %s", rs, rr)
		}
		for _, want := range []string{"revision counter 9", "rank 1", "dataDirectoryName=" + faultedDir, "diskPath=" + d.Path,
			"head=volume-head-001.img", "size=1048576", "revisionCounter=9"} {
			if !strings.Contains(rm, want) {
				return fmt.Errorf("Recoverable message %q lacks %q", rm, want)
			}
		}
		return nil
	})
	if !exists(t, d.Dir(faultedDir)) {
		t.Fatal("the last copy of the faulted volume was purged")
	}
	if !exists(t, d.Dir(ownedDir)) {
		t.Fatal("auto-deletion removed the directory a Replica expects")
	}

	e.setVolume("pvc-faulted", "healthy")
	e.waitFor("the healthy volume's orphan to be purged", func() error {
		if exists(t, d.Dir(faultedDir)) {
			return errors.New(faultedDir + " still there")
		}
		return nil
	})
}

// label is `kubectl -n NS label orphan NAME KEY=VALUE`.
func (e *env) label(name, key, value string) {
	e.t.Helper()
	o := &orphanctrl.Orphan{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if err := e.c.Patch(context.Background(), o, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		e.t.Fatalf("kubectl label orphan %s %s: %v", name, key, err)
	}
}

// TestLastCopyOverrideLetsARequestedPurgeThrough: three recoverable
// orphans of a faulted volume, with auto-deletion on. The one a user
// deletes without the label caretaker.io/last-copy-override=true stays
// (its data kept, the Orphan held by its finalizer with PurgeGuarded=True,
// LastCopy); the one labelled and deleted is purged; the one labelled but
// not deleted stays, since the override never lets an automatic purge
// through. Labelling the deleted one afterwards lets its purge through
// too.
func TestLastCopyOverrideLetsARequestedPurgeThrough(t *testing.T) {
	const (
		deletedDir  = "pvc-faulted-aaaaaaa1"
		labelledDir = "pvc-faulted-bbbbbbb1"
		bothDir     = "pvc-faulted-ccccccc1"
	)
	e := newEnv(t)
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	e.setVolume("pvc-faulted", "faulted")
	e.recoverableDir(d, deletedDir, 3)
	e.recoverableDir(d, labelledDir, 4)
	e.recoverableDir(d, bothDir, 5)
	deleted, labelled, both := longhornName(d, deletedDir), longhornName(d, labelledDir), longhornName(d, bothDir)
	e.start("node-1", manager.Options{}, func(_ manager.Manager, cfg *orphanctrl.Config) {
		cfg.Policy = orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}
	})

	guarded := func(o *orphanctrl.Orphan) error {
		if gs, gr, gm := conditionOf(o, "PurgeGuarded"); gs != "True" || gr != "LastCopy" {
			return fmt.Errorf("%s: PurgeGuarded = %s %s %q", o.Name, gs, gr, gm)
		}
		return nil
	}
	e.waitFor("the three orphans to be guarded as last copies", func() error {
		got := e.nodeOrphans("node-1")
		for _, n := range []string{deleted, labelled, both} {
			o, ok := got[n]
			if !ok {
				return fmt.Errorf("%s missing", n)
			}
			if err := guarded(o); err != nil {
				return err
			}
		}
		return nil
	})

	e.deleteOrphan(deleted)
	e.label(labelled, orphan.LabelLastCopyOverride, orphan.LabelValueLastCopyOverride)
	e.label(both, orphan.LabelLastCopyOverride, orphan.LabelValueLastCopyOverride)
	e.deleteOrphan(both)
	e.waitFor("the labelled and deleted orphan's data to be purged", func() error {
		if exists(t, d.Dir(bothDir)) {
			return errors.New(bothDir + " still there")
		}
		return nil
	})
	e.waitGone(both)

	// The cycle that purged it saw the earlier deletion and label too.
	got := e.nodeOrphans("node-1")
	if !exists(t, d.Dir(deletedDir)) {
		t.Fatal("the deleted orphan of a faulted volume was purged without the override")
	}
	o, ok := got[deleted]
	switch {
	case !ok:
		t.Fatal("the Orphan deleted without the override is gone")
	case o.DeletionTimestamp == nil || len(o.Finalizers) == 0:
		t.Fatalf("the Orphan deleted without the override: deletionTimestamp %v, finalizers %v", o.DeletionTimestamp, o.Finalizers)
	}
	if err := guarded(o); err != nil {
		t.Fatal(err)
	}
	if !exists(t, d.Dir(labelledDir)) {
		t.Fatal("the labelled orphan was purged without a deletion request")
	}
	o, ok = got[labelled]
	switch {
	case !ok:
		t.Fatal("the labelled Orphan is gone")
	case o.DeletionTimestamp != nil:
		t.Fatal("the labelled Orphan was deleted without a user's request")
	}
	if err := guarded(o); err != nil {
		t.Fatal(err)
	}

	// The label given after the deletion lets the purge through too.
	e.label(deleted, orphan.LabelLastCopyOverride, orphan.LabelValueLastCopyOverride)
	e.waitFor("the deleted orphan, labelled afterwards, to be purged", func() error {
		if exists(t, d.Dir(deletedDir)) {
			return errors.New(deletedDir + " still there")
		}
		return nil
	})
	e.waitGone(deleted)
	if !exists(t, d.Dir(labelledDir)) {
		t.Fatal("the labelled orphan was purged without a deletion request")
	}
}
