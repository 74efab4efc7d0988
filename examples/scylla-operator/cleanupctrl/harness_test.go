package cleanupctrl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/examples/scylla-operator/cleanupctrl"
	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// endpointAnnotation tells the tests' EndpointOf which fake node a member
// Service stands for (the fakes are not at the Services' ClusterIPs).
const endpointAnnotation = "test.caretaker.io/endpoint"

// waitTimeout bounds every wait for the controller.
const waitTimeout = kubetest.WaitTimeout

var (
	restCfg *rest.Config // kubetest's cluster, as a member of system:masters
	scheme  = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	// controller-runtime's global log is not what these tests check;
	// each controller the tests start logs to its test (startController).
	ctrllog.SetLogger(logr.Discard())
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	scyllaCRD, err := os.ReadFile(filepath.Join("..", "crd", "scyllaclusters.scylla.scylladb.com.yaml"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kubetest.MainWith(m, kubetest.Options{CRDs: [][]byte{scyllaCRD}, Setup: func(c *kubetest.Cluster) error {
		restCfg = rest.CopyConfig(c.Config)
		restCfg.QPS, restCfg.Burst = 100, 200
		return nil
	}})
}

// world is one test's ScyllaDB cluster: fake nodes serving their REST
// APIs, the member Services and the ScyllaCluster in a namespace of their
// own, and the test playing the Job controller.
type world struct {
	t  *testing.T
	c  client.Client
	ns string

	mu      sync.Mutex
	cluster tokenringtest.Cluster
	fakes   map[string]*tokenringtest.Server // by endpoint
	names   map[string]string                // endpoint → member Service name
	// cleanedBefore counts, per endpoint, cleanups before resetCleaned.
	cleanedBefore map[string]int
}

func newWorld(t *testing.T, cluster tokenringtest.Cluster) *world {
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
	w := &world{t: t, c: c, ns: kubetest.Namespace(t, dc, "cleanupctrl"), fakes: map[string]*tokenringtest.Server{}, names: map[string]string{}}
	ctx := context.Background()
	sc := &unstructured.Unstructured{}
	sc.SetGroupVersionKind(cleanupctrl.ScyllaClusterGVK)
	sc.SetNamespace(w.ns)
	sc.SetName("basic")
	sc.Object["spec"] = map[string]any{"version": "2025.1.0"}
	if err := c.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	w.setStable(true)
	w.setCluster(cluster)
	return w
}

// setStable writes the ScyllaCluster's status: stable (observed the
// current generation, not progressing, available, not degraded), or
// progressing.
func (w *world) setStable(stable bool) {
	w.t.Helper()
	ctx := context.Background()
	sc := &unstructured.Unstructured{}
	sc.SetGroupVersionKind(cleanupctrl.ScyllaClusterGVK)
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "basic"}, sc); err != nil {
		w.t.Fatal(err)
	}
	progressing := "False"
	if !stable {
		progressing = "True"
	}
	now := time.Now().UTC().Format(time.RFC3339)
	cond := func(t, s string) map[string]any {
		return map[string]any{"type": t, "status": s, "reason": "AsExpected", "message": "", "lastTransitionTime": now, "observedGeneration": sc.GetGeneration()}
	}
	sc.Object["status"] = map[string]any{
		"observedGeneration": sc.GetGeneration(),
		"conditions": []any{
			cond("StatefulSetControllerProgressing", progressing), cond("Available", "True"), cond("Degraded", "False"),
		},
	}
	if err := w.c.Status().Update(ctx, sc); err != nil {
		w.t.Fatal(err)
	}
}

// setCluster makes every fake node see cluster (starting a fake for each
// new node) and every member Service carry its hash, as the sidecars do.
func (w *world) setCluster(cluster tokenringtest.Cluster) {
	w.t.Helper()
	w.mu.Lock()
	w.cluster = cluster.Clone()
	var created []tokenringtest.Node
	for _, n := range cluster.Nodes {
		view := cluster.Clone()
		view.Local = n.Endpoint
		if f, ok := w.fakes[n.Endpoint]; ok {
			f.Node().SetCluster(view)
			continue
		}
		f := tokenringtest.NewServer(view, tokenringtest.ServerOptions{})
		w.t.Cleanup(f.Close)
		w.fakes[n.Endpoint] = f
		w.names[n.Endpoint] = fmt.Sprintf("basic-%s-%s-%02d", n.Datacenter, n.Rack, len(w.names))
		created = append(created, n)
	}
	w.mu.Unlock()
	hash := tokenring.HashTokens(cluster.Tokens())
	ctx := context.Background()
	for _, n := range created {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: w.names[n.Endpoint],
				Labels: map[string]string{
					cleanupctrl.ClusterLabel: "basic", cleanupctrl.ServiceTypeLabel: cleanupctrl.MemberServiceType,
					cleanupctrl.DatacenterLabel: n.Datacenter, cleanupctrl.RackLabel: n.Rack,
				},
				Annotations: map[string]string{endpointAnnotation: n.Endpoint, tokenring.CurrentTokenRingHashAnnotation: hash}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "api", Port: 10000}}},
		}
		if err := w.c.Create(ctx, svc); err != nil {
			w.t.Fatal(err)
		}
	}
	for _, n := range cluster.Nodes {
		w.setHash(n.Endpoint, hash)
	}
}

// setHash sets a member Service's current-token-ring-hash.
func (w *world) setHash(endpoint, hash string) {
	w.t.Helper()
	svc := w.service(endpoint)
	if svc.Annotations[tokenring.CurrentTokenRingHashAnnotation] == hash {
		return
	}
	patch := client.MergeFrom(svc.DeepCopy())
	svc.Annotations[tokenring.CurrentTokenRingHashAnnotation] = hash
	if err := w.c.Patch(context.Background(), svc, patch); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) service(endpoint string) *corev1.Service {
	w.t.Helper()
	w.mu.Lock()
	name := w.names[endpoint]
	w.mu.Unlock()
	var svc corev1.Service
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: name}, &svc); err != nil {
		w.t.Fatal(err)
	}
	return &svc
}

func (w *world) fake(endpoint string) *tokenringtest.Server {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fakes[endpoint]
}

// endpointOf maps a Job's member label back to its endpoint.
func (w *world) endpointOfMember(name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ep, n := range w.names {
		if n == name {
			return ep
		}
	}
	return ""
}

// startController runs a controller on a manager of its own until the
// returned stop is called (which waits for it to end).
func (w *world) startController(limits tokenring.ScheduleLimits) (stop func()) {
	w.t.Helper()
	return w.startControllerWith(limits, nil)
}

// startControllerWith is startController whose manager reads through
// wrap(the manager's API reader) when wrap is not nil.
func (w *world) startControllerWith(limits tokenring.ScheduleLimits, wrap func(client.Reader) client.Reader) (stop func()) {
	w.t.Helper()
	// The controller's log (controller-runtime's, through its manager)
	// is printed if the test fails.
	logger, _ := kubetest.HostLog(w.t, "controller")
	mgr, err := manager.New(restCfg, manager.Options{
		Logger:                 logr.FromSlogHandler(logger.Handler()),
		Scheme:                 scheme,
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{w.ns: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	if wrap != nil {
		mgr = readerManager{Manager: mgr, reader: wrap(mgr.GetAPIReader())}
	}
	_, err = cleanupctrl.Setup(mgr, cleanupctrl.Config{
		Namespace: w.ns, Cluster: "basic", Image: "example.com/scylla-cleanup:test", Limits: limits,
		Resync: 200 * time.Millisecond,
		EndpointOf: func(svc *corev1.Service) (string, error) {
			if ep := svc.Annotations[endpointAnnotation]; ep != "" {
				return ep, nil
			}
			return "", fmt.Errorf("member Service %s has no %s", svc.Name, endpointAnnotation)
		},
		APIURL: func(ep string) string {
			if f := w.fake(ep); f != nil {
				return f.URL
			}
			return "http://127.0.0.1:1" // nothing listens: the call fails
		},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			w.t.Errorf("controller: %v", err)
		}
	}
	w.t.Cleanup(stop)
	return stop
}

// jobs lists the cleanup Jobs.
func (w *world) jobs() []batchv1.Job {
	w.t.Helper()
	var list batchv1.JobList
	if err := w.c.List(context.Background(), &list, client.InNamespace(w.ns), client.HasLabels{cleanupctrl.MemberLabel}); err != nil {
		w.t.Fatal(err)
	}
	return list.Items
}

// finishJob plays the Job controller: with succeed, it runs the cleanup
// against the node's fake API (each keyspace, as scylla-cleanup does) and
// marks the Job complete; otherwise it marks it failed.
func (w *world) finishJob(job *batchv1.Job, succeed bool) {
	w.t.Helper()
	ctx := context.Background()
	ep := w.endpointOfMember(job.Labels[cleanupctrl.MemberLabel])
	now := metav1.Now()
	job.Status.StartTime = &now
	if succeed {
		c, err := tokenring.NewClient(w.fake(ep).URL, tokenring.ClientOptions{})
		if err != nil {
			w.t.Fatal(err)
		}
		if _, err := tokenring.RunCleanup(ctx, c); err != nil {
			w.t.Fatalf("cleanup of %s: %v", ep, err)
		}
		job.Status.CompletionTime = &now
		job.Status.Succeeded = 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
		}
	} else {
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastProbeTime: now, LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastProbeTime: now, LastTransitionTime: now},
		}
	}
	if err := w.c.Status().Update(ctx, job); err != nil && !apierrors.IsNotFound(err) {
		w.t.Fatalf("finishing Job %s: %v", job.Name, err)
	}
}

// waitFor polls cond until it holds or waitTimeout passes.
func (w *world) waitFor(what string, cond func() bool) {
	w.t.Helper()
	kubetest.WaitFor(w.t, waitTimeout, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet")
	})
}

// allCleanedUpTo reports whether every member Service records hash as
// its last cleaned-up ring.
func (w *world) allCleanedUpTo(hash string) bool {
	var list corev1.ServiceList
	if err := w.c.List(context.Background(), &list, client.InNamespace(w.ns)); err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	want := len(w.names)
	w.mu.Unlock()
	n := 0
	for _, s := range list.Items {
		if s.Annotations[tokenring.LastCleanedUpTokenRingHashAnnotation] == hash {
			n++
		}
	}
	return n == want
}

// topology is the cluster as the fakes serve it, for the tests' own checks.
func (w *world) topology() tokenring.Topology {
	w.t.Helper()
	w.mu.Lock()
	cl := w.cluster.Clone()
	w.mu.Unlock()
	node := tokenringtest.NewMemNode(cl)
	topo, err := tokenring.ReadTopology(context.Background(), node, node, node)
	if err != nil {
		w.t.Fatal(err)
	}
	return topo
}

// cleanedCounts returns how many cleanups of shop each node ran since the
// last resetCleaned.
func (w *world) cleanedCounts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for ep, f := range w.fakes {
		for _, ks := range f.Node().Cleaned() {
			if ks == "shop" {
				out[ep]++
			}
		}
		out[ep] -= w.cleanedBefore[ep]
	}
	return out
}

// resetCleaned makes cleanedCounts count from now.
func (w *world) resetCleaned() {
	counts := w.cleanedCounts()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cleanedBefore == nil {
		w.cleanedBefore = map[string]int{}
	}
	for ep, n := range counts {
		w.cleanedBefore[ep] += n
	}
}

// scheduler is the Scheduler of the cluster the fakes serve now.
func (w *world) scheduler() *tokenring.Scheduler {
	w.t.Helper()
	s, err := tokenring.NewScheduler(w.topology(), tokenring.ScheduleLimits{})
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

// readerManager is a manager whose API reader is another.
type readerManager struct {
	manager.Manager
	reader client.Reader
}

func (m readerManager) GetAPIReader() client.Reader { return m.reader }
