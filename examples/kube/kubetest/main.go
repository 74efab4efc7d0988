package kubetest

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/caretaker-storage/caretaker/examples/kube/crd"
)

// Stand-ins for Longhorn's Node, Replica and Volume CRDs (tests only).
var (
	//go:embed testdata/nodes.longhorn.io.yaml
	nodesCRD []byte
	//go:embed testdata/replicas.longhorn.io.yaml
	replicasCRD []byte
	//go:embed testdata/volumes.longhorn.io.yaml
	volumesCRD []byte
)

// Shared is the cluster a test package's TestMain started with Main.
var Shared *Cluster

// skipReason is set when Main runs the tests without a cluster.
var skipReason string

// Main starts a cluster with the Orphan CRD and the Longhorn Node, Replica
// and Volume stand-ins, runs the package's tests, stops the cluster, and
// exits. When the binaries are missing it fails, or, when the CI
// environment variable is unset, runs the tests so that each skips with
// the reason. The cluster's logs
// are printed when a test failed, and its directory is then kept.
func Main(m *testing.M) { MainWith(m, Options{}) }

// Options are what MainWith sets up beyond Main.
type Options struct {
	// CRDs are more CRD manifests (YAML) to install after the Orphan CRD
	// and the Longhorn stand-ins.
	CRDs [][]byte
	// Setup, if set, is called with the cluster once its CRDs are
	// established, before the tests run (not when they are skipped): a
	// test package keeps the clients it shares. An error fails the run.
	Setup func(*Cluster) error
}

// MainWith is Main with opts.
func MainWith(m *testing.M, opts Options) {
	os.Exit(run(m, opts))
}

func run(m *testing.M, opts Options) int {
	if _, _, err := Binaries(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if os.Getenv("CI") == "" {
			// Each test skips with the reason (see Require).
			skipReason = err.Error() + " (CI is unset, so this test is skipped)"
			return m.Run()
		}
		return 1
	}
	start := time.Now()
	c, err := Start(os.TempDir())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	Shared = c
	fmt.Fprintf(os.Stderr, "kubetest: etcd and kube-apiserver ready in %s at %s (logs in %s)\n",
		time.Since(start).Round(time.Millisecond), c.Config.Host, c.Dir)
	if err := c.installCRDs(opts.CRDs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		c.Stop()
		fmt.Fprintln(os.Stderr, c.LogTail(60))
		return 1
	}
	if opts.Setup != nil {
		if err := opts.Setup(c); err != nil {
			fmt.Fprintln(os.Stderr, "kubetest: setup:", err)
			c.Stop()
			return 1
		}
	}
	code := m.Run()
	c.Stop()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "kubetest: tests failed; cluster logs kept in %s\n%s", c.Dir, c.LogTail(80))
		return code
	}
	_ = c.RemoveAll()
	return code
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func (c *Cluster) installCRDs(more [][]byte) error {
	dc, err := c.Dynamic()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	for _, manifest := range append([][]byte{crd.Orphans, nodesCRD, replicasCRD, volumesCRD}, more...) {
		if err := InstallCRD(ctx, dc, manifest); err != nil {
			return err
		}
	}
	return nil
}

// InstallCRD creates the CRD in manifest (YAML) and waits until it is
// established.
func InstallCRD(ctx context.Context, dc dynamic.Interface, manifest []byte) error {
	var obj map[string]any
	if err := yaml.Unmarshal(manifest, &obj); err != nil {
		return fmt.Errorf("kubetest: CRD manifest: %w", err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := dc.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubetest: creating CRD %s: %w", u.GetName(), err)
	}
	for {
		cur, err := dc.Resource(crdGVR).Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("kubetest: CRD %s: %w", u.GetName(), err)
		}
		conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubetest: CRD %s not established: %w", u.GetName(), ctx.Err())
		case <-time.After(100 * time.Millisecond): // polling a condition with a deadline
		}
	}
}

// Namespace creates a new namespace with a name derived from prefix and
// returns its name. Namespaces are never deleted (the test cluster has no
// namespace controller); the cluster is thrown away instead.
func Namespace(t testing.TB, dc dynamic.Interface, prefix string) string {
	t.Helper()
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"generateName": prefix + "-"},
	}}
	created, err := dc.Resource(gvr).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	return created.GetName()
}

// Require returns the shared cluster. It skips the test when Main found
// no binaries outside CI, and fails it if TestMain did not call Main.
func Require(t testing.TB) *Cluster {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if Shared == nil {
		t.Fatal(errors.New("kubetest: no cluster; the package's TestMain must call kubetest.Main"))
	}
	return Shared
}
