package crstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

// TestStoreLedger runs the orphan.LedgerStore contract on the real API
// server: a new Store and Sweeper every cycle, and two Sweepers of one
// node at once, stay within one allowance an hour.
func TestStoreLedger(t *testing.T) {
	orphantest.RunConformanceTests(t, orphantest.Harness{Ledger: func(t *testing.T) func() orphan.Store {
		dc := client(t)
		opts := crstore.Options{Namespace: kubetest.Namespace(t, dc, "ledger"), OwnerID: "node-1", FieldManager: "crstore-test"}
		return func() orphan.Store { return crstore.New(dc, opts) }
	}})
}

// TestLedgerIsAConfigMapPerNode: the ledger of node-1 is the ConfigMap
// caretaker-ledger-node-1, labelled with its node; another node's Store
// keeps its own. A ledger whose data cannot be read fails the load with
// ErrBadLedger, never reads as an empty ledger.
func TestLedgerIsAConfigMapPerNode(t *testing.T) {
	ctx := context.Background()
	dc := client(t)
	ns := kubetest.Namespace(t, dc, "ledger")
	s1 := crstore.New(dc, crstore.Options{Namespace: ns, OwnerID: "node-1"})
	s2 := crstore.New(dc, crstore.Options{Namespace: ns, OwnerID: "node-2"})
	r := orphantest.SampleRecord("node-1", "pvc-1-0123abcd")
	e := orphan.AutoPurge{Name: r.Name, Scope: r.Scope(), Group: orphan.Group{Kind: r.Kind, DataEngine: r.DataEngine}, At: time.Now()}
	if _, err := s1.SaveAutoPurges(ctx, []orphan.AutoPurge{e}, ""); err != nil {
		t.Fatal(err)
	}
	if l, v, err := s2.LoadAutoPurges(ctx); err != nil || len(l) != 0 || v != "" {
		t.Fatalf("node-2's ledger: %v, %q, %v; want none", l, v, err)
	}
	cms := dc.Resource(crstore.ConfigMapGVR).Namespace(ns)
	u, err := cms.Get(ctx, "caretaker-ledger-node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u.GetLabels()[crstore.LabelLedgerNode] != "node-1" {
		t.Errorf("labels %v", u.GetLabels())
	}
	if err := unstructured.SetNestedField(u.Object, `[{"name":"orphan-x"}]`, "data", crstore.LedgerKey); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s1.LoadAutoPurges(ctx); !errors.Is(err, crstore.ErrBadLedger) || !strings.Contains(err.Error(), "caretaker-ledger-node-1") {
		t.Fatalf("a damaged ledger: %v, want ErrBadLedger naming the ConfigMap", err)
	}
}

func TestLedgerNames(t *testing.T) {
	long := strings.Repeat("n", 250)
	for node, want := range map[string]string{"": "caretaker-ledger", "node-1": "caretaker-ledger-node-1"} {
		if got := crstore.LedgerName(node); got != want {
			t.Errorf("LedgerName(%q) = %q, want %q", node, got, want)
		}
	}
	if got := crstore.LedgerName(long); len(got) > 253 || !strings.HasPrefix(got, crstore.LedgerPrefix) || got == crstore.LedgerName(long+"x") {
		t.Errorf("LedgerName of a long node = %q", got)
	}
}

func TestDecodeLedgerRefusesIncompleteEntries(t *testing.T) {
	for _, data := range []string{`{`, `[{"name":"a","node":"n","kind":"replica"}]`, `[{"node":"n","kind":"replica","at":"2026-01-02T03:04:05Z"}]`} {
		if _, err := crstore.DecodeLedger(data); !errors.Is(err, crstore.ErrBadLedger) {
			t.Errorf("DecodeLedger(%s) = %v, want ErrBadLedger", data, err)
		}
	}
	r := orphantest.SampleRecord("node-1", "pvc-1-0123abcd")
	in := []orphan.AutoPurge{{Name: r.Name, Scope: r.Scope(), Group: orphan.Group{Kind: r.Kind, DataEngine: r.DataEngine},
		At: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}}
	data, err := crstore.EncodeLedger(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := crstore.DecodeLedger(data)
	if err != nil || len(out) != 1 || out[0].Name != in[0].Name || out[0].Scope != in[0].Scope || out[0].Group != in[0].Group || !out[0].At.Equal(in[0].At) {
		t.Fatalf("round trip: %v, %v; want %v", out, err, in)
	}
}
