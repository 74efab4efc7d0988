package orphanctrl_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/examples/controller-runtime/orphanctrl"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
)

// childEnv, when set, makes the test binary run a controller instead of
// the tests: its value is "kubeconfig\nnamespace\nnode". The restart test
// starts controllers this way so it can SIGKILL one in the middle of a purge.
const childEnv = "CARETAKER_CR_CONTROLLER"

// scanPeriod keeps the tests quick; real agents scan every 30 s.
const scanPeriod = 500 * time.Millisecond

// waitTimeout bounds every wait for the controller to act.
const waitTimeout = 60 * time.Second

var (
	restCfg    *rest.Config
	kubeconfig string // a file for child processes
	scheme     *runtime.Scheme
	skipReason string
)

func TestMain(m *testing.M) {
	var err error
	if scheme, err = orphanctrl.NewScheme(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// controller-runtime's own log is not what these tests check.
	ctrllog.SetLogger(logr.Discard())
	if args := os.Getenv(childEnv); args != "" {
		os.Exit(runChild(strings.Split(args, "\n")))
	}
	os.Exit(run(m))
}

// binaries finds kube-apiserver and etcd as examples/kube's tests do:
// KUBE_APISERVER and ETCD, by default the cache that
// examples/kube/hack/build-apiserver.sh and build-etcd.sh fill (etcd 3.6,
// the release kube-apiserver v1.34.2 is built against).
func binaries() (apiserver, etcd string, err error) {
	cacheDir := os.Getenv("KUBE_APISERVER_CACHE")
	if cacheDir == "" {
		if cacheDir = os.Getenv("XDG_CACHE_HOME"); cacheDir == "" {
			home, _ := os.UserHomeDir()
			cacheDir = filepath.Join(home, ".cache")
		}
		cacheDir = filepath.Join(cacheDir, "caretaker")
	}
	if apiserver = os.Getenv("KUBE_APISERVER"); apiserver == "" {
		apiserver = filepath.Join(cacheDir, "kube-apiserver-v1.34.2")
	}
	if _, err := os.Stat(apiserver); err != nil {
		return "", "", err
	}
	if etcd = os.Getenv("ETCD"); etcd == "" {
		etcd = filepath.Join(cacheDir, "etcd-v3.6.4")
	}
	if _, err := os.Stat(etcd); err != nil {
		return "", "", err
	}
	return apiserver, etcd, nil
}

func run(m *testing.M) int {
	apiserver, etcd, err := binaries()
	if err != nil {
		msg := fmt.Sprintf("orphanctrl tests: kube-apiserver or etcd missing (%v); run `make kube-test` from the repository root, or set KUBE_APISERVER and ETCD", err)
		fmt.Fprintln(os.Stderr, msg)
		if os.Getenv("CI") == "" {
			skipReason = msg + " (CI is unset, so this test is skipped)"
			return m.Run()
		}
		return 1
	}
	// envtest runs exactly these binaries (TEST_ASSET_*); it downloads nothing.
	os.Setenv("TEST_ASSET_KUBE_APISERVER", apiserver)
	os.Setenv("TEST_ASSET_ETCD", etcd)
	env := &envtest.Environment{
		// The Orphan CRD and the Node and Replica stand-ins examples/kube's tests install.
		CRDDirectoryPaths:     []string{"../../kube/crd", "../../kube/kubetest/testdata"},
		ErrorIfCRDPathMissing: true,
	}
	start := time.Now()
	if restCfg, err = env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	fmt.Fprintf(os.Stderr, "envtest: etcd and kube-apiserver ready in %s at %s\n", time.Since(start).Round(time.Millisecond), restCfg.Host)
	restCfg.QPS, restCfg.Burst = 50, 100
	user, err := env.AddUser(envtest.User{Name: "orphan-controller", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kc, err := user.KubeConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "orphanctrl-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// newManager returns a manager whose cache holds what node's controller
// needs of ns (orphanctrl.NewLocalCache), with no metrics or probe
// listeners, and the LocalCache for the controller's Config. Many
// managers share the test process, hence SkipNameValidation.
func newManager(cfg *rest.Config, ns, node string, opts manager.Options) (manager.Manager, *orphanctrl.LocalCache, error) {
	lc := orphanctrl.NewLocalCache(ns, node)
	opts.Scheme = scheme
	opts.Cache = lc.Options()
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	opts.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	mgr, err := manager.New(cfg, opts)
	return mgr, lc, err
}

// runChild runs one node's controller until SIGTERM: args are the
// kubeconfig, the namespace and the node.
func runChild(args []string) int {
	cfg, err := clientcmd.BuildConfigFromFlags("", args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg.QPS, cfg.Burst = 50, 100
	mgr, lc, err := newManager(cfg, args[1], args[2], manager.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := orphanctrl.Setup(mgr, orphanctrl.Config{NodeID: args[2], Namespace: args[1], Period: scanPeriod, LocalCache: lc}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := mgr.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// env is one test's world: a namespace on the shared API server, a direct
// (uncached) client, and a directory for the nodes' disks.
type env struct {
	t    *testing.T
	c    client.Client
	ns   string
	base string
	cfg  *rest.Config // the managers' REST config; nil means restCfg
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "orphanctrl-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, c: c, ns: ns.Name, base: t.TempDir()}
}

// tweak adjusts a test's Config once its manager exists.
type tweak func(mgr manager.Manager, cfg *orphanctrl.Config)

// start runs a manager with node's controller until the test ends.
func (e *env) start(node string, opts manager.Options, tw tweak) manager.Manager {
	e.t.Helper()
	cfg := restCfg
	if e.cfg != nil {
		cfg = e.cfg
	}
	// The controller's log and its manager's (controller-runtime's
	// "Reconciler error" lines among them) are printed if the test fails.
	logger, _ := kubetest.HostLog(e.t, "controller "+node)
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.FromSlogHandler(logger.Handler())
	}
	mgr, lc, err := newManager(cfg, e.ns, node, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	ccfg := orphanctrl.Config{NodeID: node, Namespace: e.ns, Period: scanPeriod, LocalCache: lc, Logger: logger}
	if tw != nil {
		tw(mgr, &ccfg)
	}
	if _, err := orphanctrl.Setup(mgr, ccfg); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				e.t.Errorf("manager: %v", err)
			}
		case <-time.After(30 * time.Second):
			e.t.Errorf("the manager did not stop within 30 s")
		}
	})
	return mgr
}

// disk is a Longhorn v1 disk of a node, on the real filesystem.
type disk struct {
	node, name, path, uuid string
}

func (d disk) dir(dataName string) string { return filepath.Join(d.path, "replicas", dataName) }

// addNode creates a disk directory and the Longhorn Node object naming it.
func (e *env) addNode(node, diskName string) disk {
	e.t.Helper()
	d := disk{node: node, name: diskName, path: filepath.Join(e.base, node, diskName), uuid: uuid.NewString()}
	if err := diskscantest.NewDisk(d.path, d.name, d.uuid); err != nil {
		e.t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Node",
		"metadata": map[string]any{"name": node, "namespace": e.ns},
		"spec": map[string]any{
			"name": node,
			"disks": map[string]any{diskName: map[string]any{
				"path": d.path, "diskType": "filesystem", "allowScheduling": true, "evictionRequested": false,
			}},
		},
	}}
	ctx := context.Background()
	if err := e.c.Create(ctx, u); err != nil {
		e.t.Fatal(err)
	}
	u.Object["status"] = map[string]any{"diskStatus": map[string]any{diskName: map[string]any{"diskUUID": d.uuid}}}
	if err := e.c.Status().Update(ctx, u); err != nil {
		e.t.Fatal(err)
	}
	return d
}

// owned makes a replica directory and the Replica object that expects it.
func (e *env) owned(d disk, dataName string) {
	e.t.Helper()
	e.orphanDir(d, dataName)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
		"metadata": map[string]any{
			"name": "replica-" + dataName, "namespace": e.ns, "labels": map[string]any{"longhornnode": d.node},
		},
		"spec": map[string]any{"nodeID": d.node, "diskID": d.uuid, "diskPath": d.path, "dataDirectoryName": dataName},
	}}
	if err := e.c.Create(context.Background(), u); err != nil {
		e.t.Fatal(err)
	}
}

// orphanDir makes a replica directory that no Replica expects.
func (e *env) orphanDir(d disk, dataName string) {
	e.t.Helper()
	if err := diskscantest.MakeReplica(d.path, dataName, diskscantest.Replica{Size: 1 << 20, Written: 4096}); err != nil {
		e.t.Fatal(err)
	}
}

// longhornName is Longhorn's name for the orphan of a replica directory,
// computed here on its own: "orphan-" + sha256 of
// <node>-<disk name>-<disk path>-<disk UUID>-<data directory>.
func longhornName(d disk, dataName string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{d.node, d.name, d.path, d.uuid, dataName}, "-")))
	return "orphan-" + hex.EncodeToString(sum[:])
}

// nodeOrphans lists node's Orphan objects from the API server, by name.
func (e *env) nodeOrphans(node string) map[string]*orphanctrl.Orphan {
	e.t.Helper()
	var list orphanctrl.OrphanList
	if err := e.c.List(context.Background(), &list, client.InNamespace(e.ns), client.MatchingLabels{"longhornnode": node}); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]*orphanctrl.Orphan{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// waitFor polls cond until it returns nil, failing the test with cond's
// last answer after waitTimeout.
func (e *env) waitFor(what string, cond func() error) {
	e.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("waiting for %s: gave up after %s: %v", what, waitTimeout, err)
		}
		time.Sleep(100 * time.Millisecond) // polling the API server with a deadline
	}
}

// waitOrphans waits until node's Orphans are exactly names, each with
// DataCleanable=True.
func (e *env) waitOrphans(node string, names ...string) map[string]*orphanctrl.Orphan {
	e.t.Helper()
	var got map[string]*orphanctrl.Orphan
	e.waitFor(fmt.Sprintf("the orphans of %s to be %d cleanable objects", node, len(names)), func() error {
		got = e.nodeOrphans(node)
		if len(got) != len(names) {
			return fmt.Errorf("have %d", len(got))
		}
		for _, n := range names {
			o, ok := got[n]
			if !ok {
				return fmt.Errorf("%s missing", n)
			}
			if c := condition(o, "DataCleanable"); c != "True" {
				return fmt.Errorf("%s: DataCleanable = %q", n, c)
			}
		}
		return nil
	})
	return got
}

func condition(o *orphanctrl.Orphan, typ string) string {
	for _, c := range o.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// deleteOrphan is `kubectl -n NS delete orphan NAME`.
func (e *env) deleteOrphan(name string) {
	e.t.Helper()
	o := &orphanctrl.Orphan{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}
	if err := e.c.Delete(context.Background(), o); err != nil {
		e.t.Fatalf("kubectl delete orphan %s: %v", name, err)
	}
}

func (e *env) getOrphan(name string) (*orphanctrl.Orphan, error) {
	var o orphanctrl.Orphan
	err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &o)
	return &o, err
}

func (e *env) waitGone(name string) {
	e.t.Helper()
	e.waitFor("orphan "+name+" to be gone", func() error {
		_, err := e.getOrphan(name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
}

func (e *env) setDiskEviction(d disk, evict bool) {
	e.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(orphanctrl.NodeGVK)
	u.SetNamespace(e.ns)
	u.SetName(d.node)
	patch := fmt.Sprintf(`{"spec":{"disks":{%q:{"evictionRequested":%t}}}}`, d.name, evict)
	if err := e.c.Patch(context.Background(), u, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		e.t.Fatal(err)
	}
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// tombstones lists the purge tombstones in a disk's replicas directory.
func tombstones(t *testing.T, d disk) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(d.path, "replicas"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".caretaker-purge.") {
			out = append(out, e.Name())
		}
	}
	return out
}

// The data directories of the tests: <volume>-<8 alphanumerics>.
const (
	ownedDir   = "pvc-owned-aaaaaaa1"
	orphanDirA = "pvc-lost-bbbbbbb1"
	orphanDirB = "pvc-lost-bbbbbbb2"
)

// newTwoOrphanNode: node-1 with disk-1 holding an expected directory and
// the orphan directories A and B, its controller running, and both
// Orphans created and cleanable.
func newTwoOrphanNode(t *testing.T, opts manager.Options, tw tweak) (e *env, d disk, nameA, nameB string) {
	t.Helper()
	e = newEnv(t)
	d = e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	e.orphanDir(d, orphanDirA)
	e.orphanDir(d, orphanDirB)
	e.start("node-1", opts, tw)
	nameA, nameB = longhornName(d, orphanDirA), longhornName(d, orphanDirB)
	e.waitOrphans("node-1", nameA, nameB)
	return e, d, nameA, nameB
}
