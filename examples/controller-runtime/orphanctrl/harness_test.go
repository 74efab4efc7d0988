package orphanctrl_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

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
const waitTimeout = kubetest.WaitTimeout

var (
	restCfg    *rest.Config // kubetest's cluster, as a member of system:masters
	kubeconfig string       // a file of it for child processes
	scheme     *runtime.Scheme
)

func TestMain(m *testing.M) {
	var err error
	if scheme, err = orphanctrl.NewScheme(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// controller-runtime's global log is not what these tests check;
	// each manager the tests start logs to its test (start).
	ctrllog.SetLogger(logr.Discard())
	if args := os.Getenv(childEnv); args != "" {
		os.Exit(runChild(strings.Split(args, "\n")))
	}
	// The Orphan CRD and the Node, Replica and Volume stand-ins
	// examples/kube's tests install.
	kubetest.MainWith(m, kubetest.Options{Setup: func(c *kubetest.Cluster) error {
		restCfg = rest.CopyConfig(c.Config)
		restCfg.QPS, restCfg.Burst = 50, 100
		kubeconfig = c.Kubeconfig
		return nil
	}})
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
	// The child's log goes to the file the test prints if it fails.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	mgr, lc, err := newManager(cfg, args[1], args[2], manager.Options{Logger: logr.FromSlogHandler(logger.Handler())})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := orphanctrl.Setup(mgr, orphanctrl.Config{NodeID: args[2], Namespace: args[1], Period: scanPeriod, LocalCache: lc, Logger: logger}); err != nil {
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
	cfg  *rest.Config       // the managers' REST config; nil means restCfg
	lh   *kubetest.Longhorn // Longhorn's objects and disks
}

func newEnv(t *testing.T) *env {
	t.Helper()
	kubetest.Require(t)
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := kubetest.Namespace(t, dc, "orphanctrl")
	base := t.TempDir()
	return &env{t: t, c: c, ns: ns, base: base, lh: &kubetest.Longhorn{T: t, Client: dc, Namespace: ns, Base: base}}
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
type disk = kubetest.Disk

// addNode creates a disk directory and the Longhorn Node object naming it.
func (e *env) addNode(node, diskName string) disk { return e.lh.AddNode(node, diskName) }

// owned makes a replica directory and the Replica object that expects it.
func (e *env) owned(d disk, dataName string) { e.lh.Owned(d, dataName) }

// orphanDir makes a replica directory that no Replica expects.
func (e *env) orphanDir(d disk, dataName string) { e.lh.OrphanDir(d, dataName) }

// longhornName is Longhorn's name for the orphan of a replica directory.
func longhornName(d disk, dataName string) string { return kubetest.OrphanName(d, dataName) }

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
	kubetest.WaitFor(e.t, waitTimeout, what, cond)
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

func (e *env) setDiskEviction(d disk, evict bool) { e.lh.SetDiskEviction(d, evict) }

func exists(t *testing.T, path string) bool { t.Helper(); return kubetest.Exists(t, path) }

// tombstones lists the purge tombstones in a disk's replicas directory.
func tombstones(t *testing.T, d disk) []string { t.Helper(); return kubetest.Tombstones(t, d) }

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
