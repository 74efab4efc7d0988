package orphan_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/orphan"
)

func replicaItem(node, disk, dataName string) orphan.Item {
	return orphan.Item{
		Kind:       orphan.KindReplicaData,
		NodeID:     node,
		DataEngine: orphan.DataEngineV1,
		Parameters: map[string]string{
			orphan.ParamDataName: dataName,
			orphan.ParamDiskName: disk,
			orphan.ParamDiskUUID: "4c8e0c8a-1b0f-4e4b-9d55-6a3a0d3c1c11",
			orphan.ParamDiskPath: "/var/lib/longhorn",
			orphan.ParamDiskType: "filesystem",
		},
	}
}

// The expected names were computed outside Go, with
// printf '%s' '<joined fields>' | sha256sum.
func TestNameMatchesLonghornFormula(t *testing.T) {
	cases := []struct {
		item orphan.Item
		want string
	}{
		{
			// node-1-disk-1-/var/lib/longhorn-4c8e0c8a-...-pvc-1-0123abcd
			item: replicaItem("node-1", "disk-1", "pvc-1-0123abcd"),
			want: "orphan-11ee5be690eb5e9e9a57ada2e781e1f8c0a15077f8766ce1bc648be20bfc27a7",
		},
		{
			// pvc-3-e-0-9b2f6f0e-...-instance-manager-node-a-v2
			item: orphan.Item{Kind: orphan.KindEngineInstance, NodeID: "node-a", DataEngine: orphan.DataEngineV2,
				Parameters: map[string]string{
					orphan.ParamInstanceName:    "pvc-3-e-0",
					orphan.ParamInstanceUUID:    "9b2f6f0e-4d8c-4a57-8f0e-1c9d3e2b7a10",
					orphan.ParamInstanceManager: "instance-manager-node-a",
				}},
			want: "orphan-ab94387a3222f1b286712647e9651adc5b39ffc3e42de8772f7b38f3e40f4ed3",
		},
	}
	for _, tc := range cases {
		got, err := tc.item.Name()
		if err != nil {
			t.Fatalf("Name(%+v): %v", tc.item, err)
		}
		if got != tc.want {
			t.Errorf("Name(%+v) = %s, want %s", tc.item, got, tc.want)
		}
	}
}

func TestNameTrimsSurroundingSpaceOnly(t *testing.T) {
	base := replicaItem("node-1", "disk-1", "pvc-1-0123abcd")
	padded := replicaItem(" node-1", "disk-1", "pvc-1-0123abcd ")
	inner := replicaItem("node-1", "disk 1", "pvc-1-0123abcd")
	n1, _ := base.Name()
	n2, _ := padded.Name()
	n3, _ := inner.Name()
	if n1 != n2 {
		t.Errorf("surrounding spaces changed the name: %s vs %s", n1, n2)
	}
	if n1 == n3 {
		t.Errorf("an inner space did not change the name")
	}
}

func TestNameDistinguishesDisksAndInstanceKinds(t *testing.T) {
	a, _ := replicaItem("node-1", "disk-1", "pvc-1-0123abcd").Name()
	b, _ := replicaItem("node-1", "disk-2", "pvc-1-0123abcd").Name()
	if a == b {
		t.Fatalf("the same directory on two disks got one name")
	}
	e := orphan.Item{Kind: orphan.KindEngineInstance, DataEngine: orphan.DataEngineV2, Parameters: map[string]string{
		orphan.ParamInstanceName: "x", orphan.ParamInstanceUUID: "u", orphan.ParamInstanceManager: "im"}}
	v1 := e
	v1.DataEngine = orphan.DataEngineV1
	ne, _ := e.Name()
	n1, _ := v1.Name()
	if ne == n1 {
		t.Fatalf("the data engine is not part of an instance's name")
	}
}

func TestNameRejectsIncompleteItems(t *testing.T) {
	full := replicaItem("node-1", "disk-1", "pvc-1-0123abcd")
	for _, key := range []string{orphan.ParamDataName, orphan.ParamDiskName, orphan.ParamDiskPath, orphan.ParamDiskUUID} {
		it := full
		it.Parameters = map[string]string{}
		for k, v := range full.Parameters {
			if k != key {
				it.Parameters[k] = v
			}
		}
		if _, err := it.Name(); !errors.Is(err, orphan.ErrInvalidItem) {
			t.Errorf("without %s: got %v, want ErrInvalidItem", key, err)
		}
	}
	noNode := full
	noNode.NodeID = ""
	if _, err := noNode.Name(); !errors.Is(err, orphan.ErrInvalidItem) {
		t.Errorf("without a node: got %v, want ErrInvalidItem", err)
	}
	if _, err := (orphan.Item{Kind: "volume"}).Name(); !errors.Is(err, orphan.ErrInvalidItem) {
		t.Errorf("unknown kind: got %v, want ErrInvalidItem", err)
	}
	inst := orphan.Item{Kind: orphan.KindReplicaInstance, Parameters: map[string]string{
		orphan.ParamInstanceName: "r", orphan.ParamInstanceUUID: "u", orphan.ParamInstanceManager: "im"}}
	if _, err := inst.Name(); !errors.Is(err, orphan.ErrInvalidItem) {
		t.Errorf("instance without a data engine: got %v, want ErrInvalidItem", err)
	}
}

func TestLabels(t *testing.T) {
	got := replicaItem("node-1", "disk-1", "pvc-1-0123abcd").Labels()
	want := map[string]string{
		"longhorn.io/component":   "orphan",
		"longhorn.io/managed-by":  "longhorn-manager",
		"longhorn.io/orphan-type": "replica",
		"longhornnode":            "node-1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("replica labels = %v, want %v", got, want)
	}
	inst := orphan.Item{Kind: orphan.KindReplicaInstance, NodeID: "node-2", DataEngine: orphan.DataEngineV2,
		Parameters: map[string]string{orphan.ParamInstanceManager: "im-1"}}
	got = inst.Labels()
	if got["longhorninstancemanager"] != "im-1" || got["longhorn.io/orphan-type"] != "replica-instance" || got["longhornnode"] != "node-2" {
		t.Errorf("instance labels = %v", got)
	}
}

func TestNewRecordCopiesParameters(t *testing.T) {
	it := replicaItem("node-1", "disk-1", "pvc-1-0123abcd")
	r, err := orphan.NewRecord(it, testEpoch)
	if err != nil {
		t.Fatal(err)
	}
	it.Parameters[orphan.ParamDataName] = "mutated"
	if r.Param(orphan.ParamDataName) != "pvc-1-0123abcd" {
		t.Fatalf("the record shares its parameters with the item")
	}
	if !r.CreatedAt.Equal(testEpoch) || r.Scope() != (orphan.Scope{NodeID: "node-1", Disk: "disk-1"}) {
		t.Fatalf("record = %+v", r)
	}
}

// FuzzNameMatchesJoinedFormula checks the allocation-free naming against
// the formula as Longhorn writes it: sha256 of the dash-joined fields,
// trimmed.
func FuzzNameMatchesJoinedFormula(f *testing.F) {
	f.Add("node-1", "disk-1", "/var/lib/longhorn", "uuid", "pvc-1-0123abcd")
	f.Add(" \t", "d", "p", "u", "x \n")
	f.Add("n", " d ", "p", "u", "\u2003")
	f.Fuzz(func(t *testing.T, node, disk, path, uuid, data string) {
		it := replicaItem(node, disk, data)
		it.Parameters[orphan.ParamDiskPath] = path
		it.Parameters[orphan.ParamDiskUUID] = uuid
		got, err := it.Name()
		if node == "" || disk == "" || path == "" || uuid == "" || data == "" {
			if !errors.Is(err, orphan.ErrInvalidItem) {
				t.Fatalf("empty field accepted: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(strings.Join([]string{node, disk, path, uuid, data}, "-"))))
		if want := "orphan-" + hex.EncodeToString(sum[:]); got != want {
			t.Fatalf("Name = %s, want %s", got, want)
		}
	})
}

// TestInstanceLabelsAreLonghorns: an instance orphan carries exactly the
// labels longhorn-manager's Orphan mutating webhook
// (webhook/resources/orphan/mutator.go) sets through
// types.GetOrphanLabelsForOrphanedEngineInstance and
// GetOrphanLabelsForOrphanedReplicaInstance: the instance's own name
// under longhornengine or longhornreplica, beside the instance manager
// and the node.
func TestInstanceLabelsAreLonghorns(t *testing.T) {
	for _, tc := range []struct {
		kind  orphan.Kind
		label string
	}{
		{orphan.KindEngineInstance, "longhornengine"},
		{orphan.KindReplicaInstance, "longhornreplica"},
	} {
		it := orphan.Item{Kind: tc.kind, NodeID: "node-2", DataEngine: orphan.DataEngineV1, Parameters: map[string]string{
			orphan.ParamInstanceName: "vol-1-x-0123abcd", orphan.ParamInstanceUUID: "u-1", orphan.ParamInstanceManager: "instance-manager-1"}}
		want := map[string]string{
			"longhorn.io/component":   "orphan",
			"longhorn.io/managed-by":  "longhorn-manager",
			"longhorn.io/orphan-type": string(tc.kind),
			"longhornnode":            "node-2",
			"longhorninstancemanager": "instance-manager-1",
			tc.label:                  "vol-1-x-0123abcd",
		}
		if got := it.Labels(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s labels = %v, want %v", tc.kind, got, want)
		}
		r, err := orphan.NewRecord(it, testEpoch)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.Labels, want) {
			t.Errorf("%s record labels = %v, want %v", tc.kind, r.Labels, want)
		}
	}
}
