package agent_test

import (
	"fmt"
	"testing"

	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
)

// TestDetachedVolumesAreStatedFromTheirReplicas is
// kubetest.RunDetachedVolumes on the agent: the orphan of a detached
// volume with a healthy replica is purged, those of detached volumes with
// a failed replica or none are guarded as last copies, and the first of
// them goes once its replica heals.
func TestDetachedVolumesAreStatedFromTheirReplicas(t *testing.T) {
	e := newEnv(t)
	kubetest.RunDetachedVolumes(t, e.lh, kubetest.DetachedHost{
		Start: func(node string) { e.startAgent(node, "-auto-delete=replica-data", "-grace-period=0") },
		PurgeGuarded: func(node, name string) (status, reason, message string, ok bool) {
			o, ok := e.nodeOrphans(node)[name]
			if !ok {
				return "", "", "", false
			}
			g := condition(o, "PurgeGuarded")
			return fmt.Sprint(g["status"]), fmt.Sprint(g["reason"]), fmt.Sprint(g["message"]), true
		},
	})
}
