package orphanctrl_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/caretaker-storage/caretaker/examples/controller-runtime/orphanctrl"
	"github.com/caretaker-storage/caretaker/orphan"
)

// setDetachedVolume makes the Volume name detached, with the robustness
// Longhorn leaves on a detached volume ("unknown") and numberOfReplicas
// n.
func (e *env) setDetachedVolume(name string, n int64) { e.lh.SetDetachedVolume(name, n) }

// volumeReplica creates a Replica of volume on another node (so this
// node's scan does not expect a directory of it), labelled
// longhornvolume=<volume> as longhorn-manager labels them, healthy or
// failed.
func (e *env) volumeReplica(volume, name string, healthy bool) {
	e.lh.VolumeReplica(volume, name, healthy)
}

// TestDetachedVolumesAreStatedFromTheirReplicas: with auto-deletion on,
// the recoverable orphan of a detached volume (robustness "unknown", as
// Longhorn reports it) whose other replica is healthy is purged; that of
// a detached volume whose only other replica failed, and that of one with
// no Replica at all, stay, guarded as last copies of faulted volumes.
func TestDetachedVolumesAreStatedFromTheirReplicas(t *testing.T) {
	const (
		healthyDir = "pvc-det-ok-aaaaaaa1"
		failedDir  = "pvc-det-failed-bbbbbbb1"
		noneDir    = "pvc-det-none-ccccccc1"
	)
	e := newEnv(t)
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	e.setDetachedVolume("pvc-det-ok", 1)
	e.volumeReplica("pvc-det-ok", "pvc-det-ok-r-1", true)
	e.setDetachedVolume("pvc-det-failed", 1)
	e.volumeReplica("pvc-det-failed", "pvc-det-failed-r-1", false)
	e.setDetachedVolume("pvc-det-none", 2)
	for _, dir := range []string{healthyDir, failedDir, noneDir} {
		e.recoverableDir(d, dir, 3)
	}
	e.start("node-1", manager.Options{}, func(_ manager.Manager, cfg *orphanctrl.Config) {
		cfg.Policy = orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}
	})
	e.waitFor("the orphan of the detached volume with a healthy replica to be purged", func() error {
		if exists(t, d.dir(healthyDir)) {
			return errors.New(healthyDir + " still there")
		}
		return nil
	})
	for _, tc := range []struct{ dir, volume string }{{failedDir, "pvc-det-failed"}, {noneDir, "pvc-det-none"}} {
		name := longhornName(d, tc.dir)
		e.waitFor("the orphan of "+tc.volume+" to be guarded as a last copy", func() error {
			o, ok := e.nodeOrphans("node-1")[name]
			if !ok {
				return errors.New("no Orphan")
			}
			if gs, gr, gm := conditionOf(o, "PurgeGuarded"); gs != "True" || gr != "LastCopy" || !strings.Contains(gm, "volume "+tc.volume+", which is faulted") {
				return fmt.Errorf("PurgeGuarded = %s %s %q", gs, gr, gm)
			}
			return nil
		})
		if !exists(t, d.dir(tc.dir)) {
			t.Fatalf("the last copy of %s was purged", tc.volume)
		}
	}
	// The failed replica is salvaged (failedAt cleared): its volume is
	// healthy, and the orphan goes.
	e.lh.HealReplica("pvc-det-failed-r-1")
	// Longhorn writes the volume's status when it salvages a replica; a
	// Volume event wakes the node, which lists the replicas anew.
	e.setVolume("pvc-det-failed", "")
	e.waitFor("the orphan of the volume whose replica healed to be purged", func() error {
		if exists(t, d.dir(failedDir)) {
			return errors.New(failedDir + " still there")
		}
		return nil
	})
	if !exists(t, d.dir(noneDir)) || !exists(t, d.dir(ownedDir)) {
		t.Fatal("a kept directory was purged")
	}
}
