package kubetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Host is what the scenarios both Kubernetes hosts run (RunDetachedVolumes,
// RunLateWantedVolume) need of the host under test.
type Host struct {
	// Start starts the host of node with automatic deletion of replica
	// data on, and no grace period.
	Start func(node string)
	// PurgeGuarded returns the PurgeGuarded condition of the Orphan name
	// of node; ok is false when there is no such Orphan.
	PurgeGuarded func(node, name string) (status, reason, message string, ok bool)
	// Settle, if set, waits until the host started has nothing left to
	// do (its first lists read, its first sweeps done).
	Settle func()
}

// RunDetachedVolumes is the detached-volume test both Kubernetes hosts
// run: with auto-deletion on, the recoverable orphan of a detached
// volume (robustness "unknown", as Longhorn reports it) whose other
// replica is healthy is purged; that of a detached volume whose only
// other replica failed, and that of one with no Replica at all, stay,
// guarded as last copies of faulted volumes. Once the failed replica is
// salvaged (failedAt cleared) and the volume's status written again, its
// orphan goes too; the directory a Replica expects and the copy of the
// volume without replicas stay throughout.
func RunDetachedVolumes(t *testing.T, lh *Longhorn, h Host) {
	t.Helper()
	const (
		ownedDir   = "pvc-owned-aaaaaaa1"
		healthyDir = "pvc-det-ok-aaaaaaa1"
		failedDir  = "pvc-det-failed-bbbbbbb1"
		noneDir    = "pvc-det-none-ccccccc1"
	)
	d := lh.AddNode("node-1", "disk-1")
	lh.Owned(d, ownedDir)
	lh.SetDetachedVolume("pvc-det-ok", 1)
	lh.VolumeReplica("pvc-det-ok", "pvc-det-ok-r-1", true)
	lh.SetDetachedVolume("pvc-det-failed", 1)
	lh.VolumeReplica("pvc-det-failed", "pvc-det-failed-r-1", false)
	lh.SetDetachedVolume("pvc-det-none", 2)
	for _, dir := range []string{healthyDir, failedDir, noneDir} {
		lh.RecoverableDir(d, dir, 3)
	}
	h.Start("node-1")
	kept := func() {
		t.Helper()
		if !Exists(t, d.Dir(ownedDir)) {
			t.Fatal("auto-deletion removed the directory a Replica expects")
		}
		if !Exists(t, d.Dir(noneDir)) {
			t.Fatal("the last copy of pvc-det-none, a volume with no replica, was purged")
		}
	}
	WaitFor(t, 0, "the orphan of the detached volume with a healthy replica to be purged", func() error {
		if Exists(t, d.Dir(healthyDir)) {
			return errors.New(healthyDir + " still there")
		}
		return nil
	})
	for _, tc := range []struct{ dir, volume string }{{failedDir, "pvc-det-failed"}, {noneDir, "pvc-det-none"}} {
		name := OrphanName(d, tc.dir)
		WaitFor(t, 0, "the orphan of "+tc.volume+" to be guarded as a last copy", func() error {
			if !Exists(t, d.Dir(tc.dir)) {
				t.Fatalf("the last copy of %s was purged", tc.volume)
			}
			status, reason, msg, ok := h.PurgeGuarded("node-1", name)
			switch {
			case !ok:
				return errors.New("no Orphan")
			case status != "True" || reason != "LastCopy" || !strings.Contains(msg, "volume "+tc.volume+", which is faulted"):
				return fmt.Errorf("PurgeGuarded = %s %s %q", status, reason, msg)
			}
			return nil
		})
	}
	kept()
	// The failed replica is salvaged: its volume is healthy, and the orphan
	// goes. Longhorn writes the volume's status when it salvages a
	// replica; that wakes the node, which counts the replicas anew.
	lh.HealReplica("pvc-det-failed-r-1")
	lh.SetVolume("pvc-det-failed", "")
	WaitFor(t, 0, "the orphan of the volume whose replica healed to be purged", func() error {
		if Exists(t, d.Dir(failedDir)) {
			return errors.New(failedDir + " still there")
		}
		return nil
	})
	kept()
}

// RunLateWantedVolume is the late-wanted-volume test both Kubernetes
// hosts run. A host that reads only the volumes of its orphans has not
// read a faulted volume whose copy on the node is orphaned only after the
// host started. The copy, found later, must not be judged the copy of a
// deleted volume (and purged): it is guarded as the last copy of a
// faulted volume, and purged only when the volume heals. A purge of it
// fails the test at once, as a purge, not as a missing Orphan.
func RunLateWantedVolume(t *testing.T, lh *Longhorn, h Host) {
	t.Helper()
	const lateDir = "pvc-late-eeeeeee1"
	d := lh.AddNode("node-1", "disk-1")
	lh.Owned(d, "pvc-owned-aaaaaaa1")
	h.Start("node-1")
	if h.Settle != nil {
		h.Settle()
	}
	// Created while no orphan of it is on the node.
	lh.SetVolume("pvc-late", "faulted")
	lh.RecoverableDir(d, lateDir, 7)
	late := OrphanName(d, lateDir)
	purged := func() {
		t.Helper()
		if !Exists(t, d.Dir(lateDir)) {
			// Not "no Orphan": a purged copy's Orphan is gone too.
			t.Fatal("the last copy of the faulted volume, wanted late, was purged")
		}
	}
	WaitFor(t, 0, "the late volume's orphan to show the refusal", func() error {
		purged()
		status, reason, msg, ok := h.PurgeGuarded("node-1", late)
		switch {
		case !ok:
			return errors.New("no Orphan")
		case status != "True" || reason != "LastCopy" || !strings.Contains(msg, "volume pvc-late, which is faulted"):
			return fmt.Errorf("PurgeGuarded = %s %s %q", status, reason, msg)
		}
		return nil
	})
	purged()
	lh.SetVolume("pvc-late", "healthy")
	WaitFor(t, 0, "the healed volume's orphan to be purged", func() error {
		if Exists(t, d.Dir(lateDir)) {
			return errors.New(lateDir + " still there")
		}
		return nil
	})
	if !Exists(t, d.Dir("pvc-owned-aaaaaaa1")) {
		t.Fatal("auto-deletion removed the directory a Replica expects")
	}
}
