package split_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/examples/kube/split"
	"github.com/caretaker-storage/caretaker/orphan"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

const waitTimeout = kubetest.WaitTimeout

type world struct {
	t      *testing.T
	dc     dynamic.Interface
	ns     string
	node   string
	disk   string
	path   string
	uuid   string
	orphan dynamic.ResourceInterface
	lh     *kubetest.Longhorn
	d      kubetest.Disk
}

// newWorld is node-1 with disk-1, its Longhorn Node object naming it.
func newWorld(t *testing.T) *world {
	t.Helper()
	c := kubetest.Require(t)
	dc, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	ns := kubetest.Namespace(t, dc, "split")
	lh := &kubetest.Longhorn{T: t, Client: dc, Namespace: ns, Base: t.TempDir()}
	d := lh.AddNode("node-1", "disk-1")
	return &world{t: t, dc: dc, ns: ns, node: d.Node, disk: d.Name, path: d.Path, uuid: d.UUID,
		orphan: dc.Resource(crstore.GVR).Namespace(ns), lh: lh, d: d}
}

func (w *world) dir(data string) string { return w.d.Dir(data) }

// replicaDir writes a replica directory; owned ones get a Replica object.
func (w *world) replicaDir(data string, owned bool) {
	w.t.Helper()
	if owned {
		w.lh.Owned(w.d, data)
	} else {
		w.lh.OrphanDir(w.d, data)
	}
}

func (w *world) volume(name, robustness string) { w.t.Helper(); w.lh.SetVolume(name, robustness) }

func (w *world) name(data string) string {
	it := orphan.Item{Kind: orphan.KindReplicaData, NodeID: w.node, DataEngine: orphan.DataEngineV1, Parameters: map[string]string{
		orphan.ParamDataName: data, orphan.ParamDiskName: w.disk, orphan.ParamDiskPath: w.path, orphan.ParamDiskUUID: w.uuid}}
	n, err := it.Name()
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

func (w *world) waitFor(what string, cond func() error) {
	w.t.Helper()
	kubetest.WaitFor(w.t, waitTimeout, what, cond)
}

func (w *world) get(name string) (*unstructured.Unstructured, error) {
	return w.orphan.Get(context.Background(), name, metav1.GetOptions{})
}

func condition(o *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// TestFinalizerPurgesThroughTheGuards: Longhorn's shape. The node
// controller creates the Orphans; a user deletes two of them, and the
// finalizer purges through orphan.Sweeper.PurgeRecord. The healthy
// volume's orphan is purged (directory gone, object gone); the faulted
// volume's last copy is refused: the finalizer stays, the Orphan shows
// Error=True with the rule and why, the node controller's own passes
// keep it so, and the directory stays, until a person's override label
// lets the finalizer through.
func TestFinalizerPurgesThroughTheGuards(t *testing.T) {
	w := newWorld(t)
	const healthy, faulted = "pvc-healthy-aaaaaaa1", "pvc-faulted-bbbbbbb1"
	w.replicaDir("pvc-live-ccccccc1", true)
	w.replicaDir("pvc-live-ccccccc2", true)
	w.replicaDir(healthy, false)
	w.replicaDir(faulted, false)
	w.volume("pvc-live", "healthy")
	w.volume("pvc-healthy", "healthy")
	w.volume("pvc-faulted", "faulted")

	// The host's log is printed if the test fails.
	logger, _ := kubetest.HostLog(t, "split host")
	h, err := split.New(split.Config{Client: w.dc, Namespace: w.ns, NodeID: w.node,
		Period: 300 * time.Millisecond, RetryAfter: 300 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	// The node controller records both, cleanable.
	for _, data := range []string{healthy, faulted} {
		n := w.name(data)
		w.waitFor("the orphan of "+data, func() error {
			o, err := w.get(n)
			if err != nil {
				return err
			}
			if c := condition(o, orphan.ConditionDataCleanable); c["status"] != "True" {
				return fmt.Errorf("DataCleanable = %v", c)
			}
			return nil
		})
	}

	// kubectl delete orphan, both.
	for _, data := range []string{healthy, faulted} {
		if err := w.orphan.Delete(context.Background(), w.name(data), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The healthy volume's orphan: data gone, object gone.
	w.waitFor("the healthy volume's orphan to be purged", func() error {
		if _, err := w.get(w.name(healthy)); !apierrors.IsNotFound(err) {
			return fmt.Errorf("object: %v", err)
		}
		if _, err := os.Lstat(w.dir(healthy)); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("directory: %v", err)
		}
		return nil
	})

	// The faulted volume's last copy: refused, finalizer kept, Error=True.
	fn := w.name(faulted)
	check := func() error {
		o, err := w.get(fn)
		if err != nil {
			return err
		}
		if o.GetDeletionTimestamp() == nil || len(o.GetFinalizers()) != 1 || o.GetFinalizers()[0] != crstore.Finalizer {
			return fmt.Errorf("deletion %v, finalizers %v", o.GetDeletionTimestamp(), o.GetFinalizers())
		}
		c := condition(o, orphan.ConditionError)
		if c["status"] != "True" || c["reason"] != orphan.ReasonPurgeRefused || !strings.HasPrefix(fmt.Sprint(c["message"]), string(orphan.GuardLastCopy)+":") {
			return fmt.Errorf("Error = %v", c)
		}
		if _, err := os.Stat(filepath.Join(w.dir(faulted), "volume.meta")); err != nil {
			return fmt.Errorf("the last copy's directory: %v", err)
		}
		return nil
	}
	w.waitFor("the faulted volume's orphan to be refused, visibly", check)
	// The node controller's own passes keep the refusal on show.
	for range 2 {
		if _, _, err := h.SyncNode(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := check(); err != nil {
		t.Fatalf("after the node controller's passes: %v", err)
	}
	// Called directly, the finalizer says why.
	_, err = h.Finalize(context.Background(), fn)
	var ref *orphan.Refusal
	if !errors.As(err, &ref) || ref.Rule != string(orphan.GuardLastCopy) {
		t.Fatalf("Finalize = %v, want a LastCopy refusal", err)
	}

	// A person confirms: the finalizer's retry purges.
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, orphan.LabelLastCopyOverride, orphan.LabelValueLastCopyOverride)
	if _, err := w.orphan.Patch(context.Background(), fn, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the overridden orphan to be purged", func() error {
		if _, err := w.get(fn); !apierrors.IsNotFound(err) {
			return fmt.Errorf("object: %v", err)
		}
		if _, err := os.Lstat(w.dir(faulted)); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("directory: %v", err)
		}
		return nil
	})
	// The owned replicas were never touched.
	for _, data := range []string{"pvc-live-ccccccc1", "pvc-live-ccccccc2"} {
		if _, err := os.Stat(filepath.Join(w.dir(data), "volume.meta")); err != nil {
			t.Fatalf("owned replica %s: %v", data, err)
		}
	}
}
