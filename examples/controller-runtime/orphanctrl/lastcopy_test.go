package orphanctrl_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/caretaker-storage/caretaker/examples/controller-runtime/orphanctrl"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/salvage/salvagetest"
)

// recoverableDir writes a Longhorn v1 replica directory, in the engine's
// format, that an inspection finds recoverable.
func (e *env) recoverableDir(d disk, dataName string, revision int64) {
	e.t.Helper()
	r := salvagetest.Replica{Size: 1 << 20, Counter: true, Revision: revision,
		Snapshots: []salvagetest.Layer{{Writes: []salvagetest.Write{salvagetest.Block(0, 'a')}}},
		Head:      salvagetest.Layer{Writes: []salvagetest.Write{salvagetest.Block(1, 'b')}}}
	if err := salvagetest.WriteReplica(d.dir(dataName), r); err != nil {
		e.t.Fatal(err)
	}
}

// setVolume creates or updates the Longhorn Volume name with
// status.robustness.
func (e *env) setVolume(name, robustness string) {
	e.t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(orphanctrl.VolumeGVK)
	err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, u)
	if apierrors.IsNotFound(err) {
		u = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "longhorn.io/v1beta2", "kind": "Volume",
			"metadata": map[string]any{"name": name, "namespace": e.ns},
			"spec":     map[string]any{"numberOfReplicas": int64(3), "size": "1048576"},
		}}
		err = e.c.Create(ctx, u)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	u.Object["status"] = map[string]any{"robustness": robustness, "state": "detached"}
	if err := e.c.Status().Update(ctx, u); err != nil {
		e.t.Fatal(err)
	}
}

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
		if exists(t, d.dir(goneDir)) {
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
		for _, want := range []string{"revision counter 9", "rank 1", "dataDirectoryName=" + faultedDir, "diskPath=" + d.path,
			"head=volume-head-001.img", "size=1048576", "revisionCounter=9"} {
			if !strings.Contains(rm, want) {
				return fmt.Errorf("Recoverable message %q lacks %q", rm, want)
			}
		}
		return nil
	})
	if !exists(t, d.dir(faultedDir)) {
		t.Fatal("the last copy of the faulted volume was purged")
	}
	if !exists(t, d.dir(ownedDir)) {
		t.Fatal("auto-deletion removed the directory a Replica expects")
	}

	e.setVolume("pvc-faulted", "healthy")
	e.waitFor("the healthy volume's orphan to be purged", func() error {
		if exists(t, d.dir(faultedDir)) {
			return errors.New(faultedDir + " still there")
		}
		return nil
	})
}
