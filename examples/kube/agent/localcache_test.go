package agent_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
)

// TestNewDiskClaimedByAnotherNodesReplica: the agent keeps only the
// replicas that can claim something on its node, and a replica claims its
// directory on the disk whose UUID is its spec.diskID whatever node it
// names (a reconnected disk's replicas can still name the old node). When
// a disk is added to the node, the agent lists the replicas again for the
// new disk's UUID: the directory such a replica claims gets no Orphan,
// while an unclaimed one beside it does. (Before that list, the disk is
// not judged at all.)
func TestNewDiskClaimedByAnotherNodesReplica(t *testing.T) {
	c := kubetest.Require(t)
	e := &scaleEnv{env: newEnv(t), disks: map[string]disk{}}
	var err error
	if e.agentCfg, err = clientcmd.BuildConfigFromFlags("", c.AgentKubeconfig); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d1 := e.addNode("node-a", "disk-1")
	e.owned(d1, dataName("live"))
	d2 := disk{node: "node-a", name: "disk-2", path: filepath.Join(e.base, "node-a", "disk-2"), uuid: uuid.NewString()}
	claimed, lost := dataName("moved"), dataName("lost")
	// The replica names another node, and the disk that is about to be
	// node-a's; its labels say both, as longhorn-manager writes them. (The
	// agent lists it by its disk label; without labels, the confirmation
	// against a full list keeps its directory: TestStaleLabelsNeverMakeOrphans.)
	r := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
		"metadata": map[string]any{"name": "r-" + claimed, "namespace": e.ns, "labels": map[string]any{"longhornnode": "node-b", "longhorndiskuuid": d2.uuid}},
		"spec":     map[string]any{"nodeID": "node-b", "diskID": d2.uuid, "diskPath": "/var/lib/longhorn/", "dataDirectoryName": claimed},
	}}
	if _, err := e.dc.Resource(longhorn.ReplicaGVR).Namespace(e.ns).Create(ctx, r, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := e.startAgent("node-a")
	t.Cleanup(func() { s.stop(t) })
	e.waitFor("the agent's first sweep", func() error {
		if sweepsOf(s) == 0 {
			return fmt.Errorf("not yet")
		}
		return nil
	})

	if err := diskscantest.NewDisk(d2.path, d2.name, d2.uuid); err != nil {
		t.Fatal(err)
	}
	e.orphanDir(d2, claimed)
	e.orphanDir(d2, lost)
	nodes := e.dc.Resource(longhorn.NodeGVR).Namespace(e.ns)
	// The new disk replaces the old one: two disks on one filesystem (the
	// test's temporary directory) are one filesystem, and neither is
	// trusted.
	patch := fmt.Sprintf(`{"spec":{"disks":{%q:null,%q:{"path":%q,"diskType":"filesystem","allowScheduling":true,"evictionRequested":false}}}}`, d1.name, d2.name, d2.path)
	if _, err := nodes.Patch(ctx, "node-a", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	status := fmt.Sprintf(`{"status":{"diskStatus":{%q:null,%q:{"diskUUID":%q}}}}`, d1.name, d2.name, d2.uuid)
	if _, err := nodes.Patch(ctx, "node-a", types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the unclaimed directory's Orphan", func() error {
		_, err := e.orphans().Get(ctx, longhornName(d2, lost), metav1.GetOptions{})
		return err
	})
	time.Sleep(3 * scalePeriod)
	if _, err := e.orphans().Get(ctx, longhornName(d2, claimed), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the directory node-b's replica claims on the new disk has an Orphan (%v)", err)
	}
	if st := s.a.Stats(); st.Replicas != 2 {
		t.Errorf("the agent holds %d replicas; want its own (it names the node) and the one claiming its new disk", st.Replicas)
	}
}
