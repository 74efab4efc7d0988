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
	kubetest.RunDetachedVolumes(t, e.lh, e.autoDeleting())
}

// TestLateWantedVolumeIsNotDeleted is kubetest.RunLateWantedVolume on the
// agent: a faulted volume created after the agent started, whose copy on
// the node is orphaned only then, is read when its copy is found, and
// its copy is guarded as a last copy, never taken as a deleted volume's.
func TestLateWantedVolumeIsNotDeleted(t *testing.T) {
	e := newEnv(t)
	kubetest.RunLateWantedVolume(t, e.lh, e.autoDeleting())
}

// autoDeleting is the agent as the shared scenarios drive it, with
// automatic deletion of replica data on.
func (e *env) autoDeleting() kubetest.Host {
	return kubetest.Host{
		Start: func(node string) { e.startAgent(node, "-auto-delete=replica-data", "-grace-period=0") },
		PurgeGuarded: func(node, name string) (status, reason, message string, ok bool) {
			o, ok := e.nodeOrphans(node)[name]
			if !ok {
				return "", "", "", false
			}
			g := condition(o, "PurgeGuarded")
			return fmt.Sprint(g["status"]), fmt.Sprint(g["reason"]), fmt.Sprint(g["message"]), true
		},
	}
}
