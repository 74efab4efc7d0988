package orphanctrl_test

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/caretaker-storage/caretaker/examples/controller-runtime/orphanctrl"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// TestDetachedVolumesAreStatedFromTheirReplicas is
// kubetest.RunDetachedVolumes on the controller: the orphan of a detached
// volume with a healthy replica is purged, those of detached volumes with
// a failed replica or none are guarded as last copies, and the first of
// them goes once its replica heals.
func TestDetachedVolumesAreStatedFromTheirReplicas(t *testing.T) {
	e := newEnv(t)
	kubetest.RunDetachedVolumes(t, e.lh, e.autoDeleting())
}

// TestLateWantedVolumeIsNotDeleted is kubetest.RunLateWantedVolume on the
// controller, settled first (quiet): its node-local cache has listed the
// Volumes, wanting none, before the faulted volume is created, so the
// volume is listed only when its copy is orphaned, by a relist.
func TestLateWantedVolumeIsNotDeleted(t *testing.T) {
	e := newEnv(t)
	h := e.autoDeleting()
	h.Settle = func() { quiet(e) }
	kubetest.RunLateWantedVolume(t, e.lh, h)
}

// autoDeleting is the controller as the shared scenarios drive it, with
// automatic deletion of replica data on.
func (e *env) autoDeleting() kubetest.Host {
	return kubetest.Host{
		Start: func(node string) {
			e.start(node, manager.Options{}, func(_ manager.Manager, cfg *orphanctrl.Config) {
				cfg.Policy = orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}
			})
		},
		PurgeGuarded: func(node, name string) (status, reason, message string, ok bool) {
			o, ok := e.nodeOrphans(node)[name]
			if !ok {
				return "", "", "", false
			}
			status, reason, message = conditionOf(o, "PurgeGuarded")
			return status, reason, message, true
		},
	}
}
