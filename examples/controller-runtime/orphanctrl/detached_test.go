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
	kubetest.RunDetachedVolumes(t, e.lh, kubetest.DetachedHost{
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
	})
}
