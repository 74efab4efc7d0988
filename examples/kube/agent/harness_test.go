package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/caretaker-storage/caretaker/examples/kube/agent"
	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/examples/kube/deploy"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
)

// agentArgsEnv, when set, makes the test binary run the agent instead of
// the tests: its value is the agent's arguments, one per line. The tests
// start agents this way so they can SIGKILL one in the middle of a purge.
const agentArgsEnv = "CARETAKER_KUBE_AGENT_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(agentArgsEnv); args != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		code := agent.Main(ctx, strings.Split(args, "\n"), os.Stderr)
		stop()
		os.Exit(code)
	}
	kubetest.Main(m)
}

// scanPeriod keeps the tests quick; real agents scan every 30 s.
const scanPeriod = 500 * time.Millisecond

// waitTimeout bounds every wait for the agent to act.
const waitTimeout = kubetest.WaitTimeout

// env is one test's world: a namespace on the shared API server and a
// directory for the nodes' disks.
type env struct {
	t    *testing.T
	dc   dynamic.Interface
	ns   string
	base string
	lh   *kubetest.Longhorn // Longhorn's objects and disks
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c := kubetest.Require(t)
	dc, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dc: dc, ns: kubetest.Namespace(t, dc, "agent"), base: t.TempDir()}
	e.lh = &kubetest.Longhorn{T: t, Client: dc, Namespace: e.ns, Base: e.base}
	e.grantAgentRBAC(c)
	return e
}

// grantAgentRBAC creates deploy/rbac.yaml in the namespace, with the
// RoleBinding naming the test cluster's agent user too, and waits until
// the agent user may list Orphans: the agents of the tests run with
// exactly the rules the example ships.
func (e *env) grantAgentRBAC(c *kubetest.Cluster) {
	e.t.Helper()
	objs, err := kubetest.Objects(deploy.RBAC)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "RoleBinding" {
			subjects := []any{
				map[string]any{"kind": "ServiceAccount", "name": "caretaker-orphan-agent", "namespace": e.ns},
				map[string]any{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": c.AgentUser},
			}
			if err := unstructured.SetNestedSlice(o.Object, subjects, "subjects"); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	if err := kubetest.Create(context.Background(), e.dc, e.ns, false, objs...); err != nil {
		e.t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.AgentKubeconfig)
	if err != nil {
		e.t.Fatal(err)
	}
	agentClient, err := dynamic.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.waitFor("the agent user's Role to take effect", func() error {
		_, err := agentClient.Resource(crstore.GVR).Namespace(e.ns).List(context.Background(), metav1.ListOptions{})
		return err
	})
}

// disk is a Longhorn v1 disk of a node, on the real filesystem
// (kubetest.Disk, as these tests spell it).
type disk struct {
	node, name, path, uuid string
}

func diskOf(d kubetest.Disk) disk {
	return disk{node: d.Node, name: d.Name, path: d.Path, uuid: d.UUID}
}

func (d disk) kube() kubetest.Disk {
	return kubetest.Disk{Node: d.node, Name: d.name, Path: d.path, UUID: d.uuid}
}

func (d disk) dir(dataName string) string { return d.kube().Dir(dataName) }

// addNode creates a disk directory and the Longhorn Node object naming it.
func (e *env) addNode(node, diskName string) disk { return diskOf(e.lh.AddNode(node, diskName)) }

// owned makes a replica directory and the Replica object that expects it.
func (e *env) owned(d disk, dataName string) { e.lh.Owned(d.kube(), dataName) }

// orphanDir makes a replica directory that no Replica expects.
func (e *env) orphanDir(d disk, dataName string) { e.lh.OrphanDir(d.kube(), dataName) }

// longhornName is Longhorn's name for the orphan of a replica directory.
func longhornName(d disk, dataName string) string { return kubetest.OrphanName(d.kube(), dataName) }

func (e *env) orphans() dynamic.ResourceInterface {
	return e.dc.Resource(crstore.GVR).Namespace(e.ns)
}

// nodeOrphans lists the Orphan objects labelled with node, by name.
func (e *env) nodeOrphans(node string) map[string]*unstructured.Unstructured {
	e.t.Helper()
	list, err := e.orphans().List(context.Background(), metav1.ListOptions{LabelSelector: "longhornnode=" + node})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		out[list.Items[i].GetName()] = &list.Items[i]
	}
	return out
}

// waitFor polls cond until it returns nil, failing the test with cond's
// last answer after waitTimeout.
func (e *env) waitFor(what string, cond func() error) {
	e.t.Helper()
	kubetest.WaitFor(e.t, waitTimeout, what, cond)
}

// waitOrphans waits until node's Orphan objects are exactly names, each
// with DataCleanable=True.
func (e *env) waitOrphans(node string, names ...string) map[string]*unstructured.Unstructured {
	e.t.Helper()
	var got map[string]*unstructured.Unstructured
	e.waitFor(fmt.Sprintf("the orphans of %s to be %d cleanable objects", node, len(names)), func() error {
		got = e.nodeOrphans(node)
		if len(got) != len(names) {
			return fmt.Errorf("have %d: %v", len(got), keys(got))
		}
		for _, n := range names {
			o, ok := got[n]
			if !ok {
				return fmt.Errorf("%s missing; have %v", n, keys(got))
			}
			if c := condition(o, "DataCleanable"); c["status"] != "True" {
				return fmt.Errorf("%s: DataCleanable = %v", n, c)
			}
		}
		return nil
	})
	return got
}

func (e *env) deleteOrphan(name string) {
	e.t.Helper()
	if err := e.orphans().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatalf("kubectl delete orphan %s: %v", name, err)
	}
}

func (e *env) waitGone(name string) {
	e.t.Helper()
	e.waitFor("orphan "+name+" to be gone", func() error {
		_, err := e.orphans().Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
}

func (e *env) setDiskEviction(d disk, evict bool) { e.lh.SetDiskEviction(d.kube(), evict) }

// agentProc is an agent running as a child process (this test binary).
type agentProc struct {
	*kubetest.Child
	log string // the path of its log
}

// startAgent starts node's agent; it is stopped at the end of the test,
// and its log printed if the test failed or ran with -v.
func (e *env) startAgent(node string, extra ...string) *agentProc {
	e.t.Helper()
	kc := kubetest.Require(e.t).AgentKubeconfig
	args := append([]string{"-kubeconfig=" + kc, "-namespace=" + e.ns, "-node=" + node, "-period=" + scanPeriod.String(), "-log-level=debug"}, extra...)
	c := kubetest.StartChild(e.t, "agent "+node, e.base, agentArgsEnv+"="+strings.Join(args, "\n"))
	return &agentProc{Child: c, log: c.Log}
}

// kill SIGKILLs the agent and waits for it to be gone.
func (p *agentProc) kill() { p.Kill() }

// stop asks the agent to stop (SIGTERM) and waits, killing it after 10 s.
func (p *agentProc) stop() { p.Stop() }

func condition(o *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func exists(t *testing.T, path string) bool { t.Helper(); return kubetest.Exists(t, path) }

// tombstones lists the purge tombstones in a disk's replicas directory.
func tombstones(t *testing.T, d disk) []string { t.Helper(); return kubetest.Tombstones(t, d.kube()) }

// newTwoOrphanNode is the common start of the agent tests: node-1 with
// disk-1 holding an expected directory and the orphan directories A and B,
// its agent running, and both Orphans created.
func newTwoOrphanNode(t *testing.T) (e *env, d disk, nameA, nameB string) {
	t.Helper()
	e = newEnv(t)
	d = e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	e.orphanDir(d, orphanDirA)
	e.orphanDir(d, orphanDirB)
	e.startAgent("node-1")
	nameA, nameB = longhornName(d, orphanDirA), longhornName(d, orphanDirB)
	e.waitOrphans("node-1", nameA, nameB)
	return e, d, nameA, nameB
}

// watchOrphans watches the test namespace's Orphans matching opts from
// now on, until ctx ends. It resumes from the last event it delivered
// when the API server drops or breaks the stream (a loaded server does),
// so a test that waits for DELETED events never misses one; an event it
// cannot resume past (410 Gone) arrives as an ERROR event.
func (e *env) watchOrphans(ctx context.Context, opts metav1.ListOptions) watch.Interface {
	e.t.Helper()
	list, err := e.orphans().List(ctx, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector, o.FieldSelector = opts.LabelSelector, opts.FieldSelector
			return e.orphans().Watch(ctx, o)
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(w.Stop)
	return w
}

// eventObject returns the object of a watch event, failing the test with
// the API server's status on an ERROR event.
func eventObject(t *testing.T, ev watch.Event) *unstructured.Unstructured {
	t.Helper()
	o, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		t.Fatalf("watch event %v: %v", ev.Type, apierrors.FromObject(ev.Object))
	}
	return o
}
