package agent_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// recoverableDir writes a Longhorn v1 replica directory, in the engine's
// format, that an inspection finds recoverable: one snapshot and a head,
// with a revision counter.
func (e *env) recoverableDir(d disk, dataName string, revision int64) {
	e.lh.RecoverableDir(d.kube(), dataName, revision)
}

// setVolume creates or updates the Longhorn Volume name with
// status.robustness.
func (e *env) setVolume(name, robustness string) { e.lh.SetVolume(name, robustness) }

// TestLastCopyOfAFaultedVolumeIsNeverAutoPurged: with auto-deletion on,
// the recoverable orphan of a faulted volume stays, and its Orphan shows
// why (PurgeGuarded=True, LastCopy) and what it holds (Recoverable=True,
// Reusable, with the reuse hint); the orphan of a deleted volume (no
// Volume object, the list complete) is purged. Once the volume is healthy
// again, its orphan goes too.
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
	e.startAgent("node-1", "-auto-delete=replica-data", "-grace-period=0")

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
		g, r := condition(o, "PurgeGuarded"), condition(o, "Recoverable")
		switch {
		case g["status"] != "True" || g["reason"] != "LastCopy":
			return fmt.Errorf("PurgeGuarded = %v", g)
		case !strings.Contains(fmt.Sprint(g["message"]), "volume pvc-faulted, which is faulted"):
			return fmt.Errorf("PurgeGuarded message = %v", g["message"])
		case r["status"] != "True" || r["reason"] != "Reusable":
			return fmt.Errorf("Recoverable = %v", r)
		}
		msg := fmt.Sprint(r["message"])
		for _, want := range []string{"revision counter 9", "rank 1", "dataDirectoryName=" + faultedDir, "diskPath=" + d.path,
			"head=volume-head-001.img", "size=1048576", "revisionCounter=9"} {
			if !strings.Contains(msg, want) {
				return fmt.Errorf("Recoverable message %q lacks %q", msg, want)
			}
		}
		return nil
	})
	if !exists(t, d.dir(faultedDir)) {
		t.Fatal("the last copy of the faulted volume was purged")
	}
	// `kubectl get orphans` shows the verdict and the refusal: the API
	// server's table of the CRD's printer columns.
	row := e.orphanTable()[faulted]
	if row["Recoverable"] != "Reusable" || row["Guarded"] != "LastCopy" {
		t.Fatalf("kubectl get orphans row = %v; want Recoverable Reusable and Guarded LastCopy", row)
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
	e.startAgent("node-1", "-auto-delete=replica-data", "-grace-period=0")

	guarded := func(o *unstructured.Unstructured) error {
		if g := condition(o, "PurgeGuarded"); g["status"] != "True" || g["reason"] != "LastCopy" {
			return fmt.Errorf("%s: PurgeGuarded = %v", o.GetName(), g)
		}
		return nil
	}
	e.waitFor("the three orphans to be guarded as last copies", func() error {
		got := e.nodeOrphans("node-1")
		for _, n := range []string{deleted, labelled, both} {
			o, ok := got[n]
			if !ok {
				return fmt.Errorf("%s missing; have %v", n, keys(got))
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
		if exists(t, d.dir(bothDir)) {
			return errors.New(bothDir + " still there")
		}
		return nil
	})
	e.waitGone(both)

	// The cycle that purged it saw the earlier deletion and label too.
	got := e.nodeOrphans("node-1")
	if !exists(t, d.dir(deletedDir)) {
		t.Fatal("the deleted orphan of a faulted volume was purged without the override")
	}
	o, ok := got[deleted]
	switch {
	case !ok:
		t.Fatalf("the Orphan deleted without the override is gone; have %v", keys(got))
	case o.GetDeletionTimestamp() == nil || len(o.GetFinalizers()) == 0:
		t.Fatalf("the Orphan deleted without the override: deletionTimestamp %v, finalizers %v", o.GetDeletionTimestamp(), o.GetFinalizers())
	}
	if err := guarded(o); err != nil {
		t.Fatal(err)
	}
	if !exists(t, d.dir(labelledDir)) {
		t.Fatal("the labelled orphan was purged without a deletion request")
	}
	o, ok = got[labelled]
	switch {
	case !ok:
		t.Fatalf("the labelled Orphan is gone; have %v", keys(got))
	case o.GetDeletionTimestamp() != nil:
		t.Fatal("the labelled Orphan was deleted without a user's request")
	}
	if err := guarded(o); err != nil {
		t.Fatal(err)
	}

	// The label given after the deletion lets the purge through too.
	e.label(deleted, orphan.LabelLastCopyOverride, orphan.LabelValueLastCopyOverride)
	e.waitFor("the deleted orphan, labelled afterwards, to be purged", func() error {
		if exists(t, d.dir(deletedDir)) {
			return errors.New(deletedDir + " still there")
		}
		return nil
	})
	e.waitGone(deleted)
	if !exists(t, d.dir(labelledDir)) {
		t.Fatal("the labelled orphan was purged without a deletion request")
	}
}

// orphanTable is what `kubectl get orphans` prints: the API server's
// Table of the namespace's Orphans (the CRD's additionalPrinterColumns),
// as column name to cell, by Orphan name.
func (e *env) orphanTable() map[string]map[string]any {
	e.t.Helper()
	cfg := kubetest.Require(e.t).Config
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimRight(cfg.Host, "/")+"/apis/longhorn.io/v1beta2/namespaces/"+e.ns+"/orphans", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		e.t.Fatalf("table of orphans: %s, %v: %s", resp.Status, err, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, r := range table.Rows {
		cells := map[string]any{}
		for i, c := range table.ColumnDefinitions {
			if i < len(r.Cells) {
				cells[c.Name] = r.Cells[i]
			}
		}
		name, _ := cells["Name"].(string)
		out[name] = cells
	}
	return out
}
