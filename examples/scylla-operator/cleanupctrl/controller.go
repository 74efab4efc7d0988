package cleanupctrl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/caretaker-storage/caretaker/tokenring"
)

// Labels scylla-operator puts on member Services (and this controller on
// its Jobs).
const (
	ClusterLabel     = "scylla/cluster"
	DatacenterLabel  = "scylla/datacenter"
	RackLabel        = "scylla/rack"
	ServiceTypeLabel = "scylla-operator.scylladb.com/scylla-service-type"
	// MemberServiceType is ServiceTypeLabel's value on member Services.
	MemberServiceType = "member"
	// MemberLabel on a cleanup Job names the member Service it cleans.
	MemberLabel = "cleanup.caretaker.io/member"
)

// ScyllaClusterGVK is the kind whose status gates cleanups.
var ScyllaClusterGVK = schema.GroupVersionKind{Group: "scylla.scylladb.com", Version: "v1", Kind: "ScyllaCluster"}

// Config configures a Controller for one ScyllaCluster.
type Config struct {
	// Namespace and Cluster name the ScyllaCluster.
	Namespace, Cluster string
	// EndpointOf returns the address ScyllaDB knows the Service's node by
	// (the ring's endpoint). nil: the Service's ClusterIP, the broadcast
	// address scylla-operator gives nodes by default.
	EndpointOf func(*corev1.Service) (string, error)
	// APIURL returns the base URL of an endpoint's REST API. nil:
	// http://<endpoint>:10000.
	APIURL func(endpoint string) string
	// ClientOptions for tokenring.NewClient (the Manager Agent's token
	// and TLS, for example).
	ClientOptions tokenring.ClientOptions
	// Limits bound the cleanups running at once (tokenring.ScheduleLimits;
	// the zero value: one rack of a datacenter at a time, at most 6).
	Limits tokenring.ScheduleLimits
	// JobPodSpec is the pod of a node's cleanup Job. nil: one container
	// of Image running scylla-cleanup -api <APIURL> -run-cleanup -yes.
	JobPodSpec func(svc *corev1.Service, apiURL string) corev1.PodSpec
	// Image is the default JobPodSpec's image (scylla-cleanup built into
	// an image).
	Image string
	// MaxAttempts is how many failed Jobs a node gets before the
	// controller gives up on it (and leaves its failed Job in place). 0: 3.
	MaxAttempts int
	// Resync is how often the cluster is looked at without an event
	// (the nodes' REST APIs send none). 0: 10 s.
	Resync time.Duration
}

// Controller reconciles one ScyllaCluster's cleanups.
type Controller struct {
	cfg    Config
	c      client.Client
	reader client.Reader
}

// Setup registers the controller with mgr. It reads through the API
// reader, never the cache: a Job created a moment ago must count as
// running, or its neighbour could start beside it.
func Setup(mgr manager.Manager, cfg Config) (*Controller, error) {
	if cfg.Namespace == "" || cfg.Cluster == "" {
		return nil, errors.New("cleanupctrl: Config.Namespace and Config.Cluster are required")
	}
	if cfg.JobPodSpec == nil && cfg.Image == "" {
		return nil, errors.New("cleanupctrl: Config.Image is required without Config.JobPodSpec")
	}
	r := &Controller{cfg: cfg, c: mgr.GetClient(), reader: mgr.GetAPIReader()}
	if r.cfg.EndpointOf == nil {
		r.cfg.EndpointOf = clusterIP
	}
	if r.cfg.APIURL == nil {
		r.cfg.APIURL = func(ep string) string { return "http://" + net.JoinHostPort(ep, "10000") }
	}
	if r.cfg.MaxAttempts <= 0 {
		r.cfg.MaxAttempts = 3
	}
	if r.cfg.Resync <= 0 {
		r.cfg.Resync = 10 * time.Second
	}
	sc := &unstructured.Unstructured{}
	sc.SetGroupVersionKind(ScyllaClusterGVK)
	key := clusterKey(cfg)
	toCluster := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: key}}
	})
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == cfg.Namespace && o.GetLabels()[ClusterLabel] == cfg.Cluster
	})
	err := ctrl.NewControllerManagedBy(mgr).
		Named("scylla-cleanup-"+cfg.Namespace+"-"+cfg.Cluster).
		For(sc, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == cfg.Namespace && o.GetName() == cfg.Cluster
		}))).
		Watches(&corev1.Service{}, toCluster, builder.WithPredicates(ours)).
		Watches(&batchv1.Job{}, toCluster, builder.WithPredicates(ours)).
		Complete(r)
	return r, err
}

func clusterIP(svc *corev1.Service) (string, error) {
	if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		return ip, nil
	}
	return "", fmt.Errorf("cleanupctrl: member Service %s has no ClusterIP", svc.Name)
}

// member is one node: its Service, endpoint and Job.
type member struct {
	svc      corev1.Service
	endpoint string
	job      *batchv1.Job
}

// Reconcile looks at the whole cluster once: records finished Jobs, stops
// failed ones' cleanups, and starts the Jobs the Scheduler allows now.
func (r *Controller) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	again := reconcile.Result{RequeueAfter: r.cfg.Resync}

	sc := &unstructured.Unstructured{}
	sc.SetGroupVersionKind(ScyllaClusterGVK)
	if err := r.reader.Get(ctx, clusterKey(r.cfg), sc); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return again, err
	}
	status, err := clusterStatus(sc)
	if err != nil {
		return again, err
	}
	members, err := r.members(ctx)
	if err != nil {
		return again, err
	}
	store := &stateStore{c: r.c, reader: r.reader, ns: r.cfg.Namespace, name: r.cfg.Cluster + "-caretaker-cleanup"}
	st, err := store.load(ctx)
	if err != nil {
		return again, err
	}
	if st.Jobs == nil {
		st.Jobs = map[string]JobRecord{}
	}
	if st.Attempts == nil {
		st.Attempts = map[string]int{}
	}

	// Jobs first: they hold what runs, whatever the ring does now.
	running, done, err := r.settleJobs(ctx, members, &st, store)
	if err != nil {
		return again, err
	}

	topo, hash, err := r.readTopology(ctx, members)
	if err != nil {
		logger.Info("cannot read the ring yet", "err", err.Error())
		return again, nil
	}
	// No JoinOrder: member Services do not say in which order nodes of
	// different racks joined, and a wrong order would miss cleanups.
	// Without one, nodes first seen together are each taken to have
	// joined first, which only asks for more cleanups.
	observed, err := st.Baselines.Observe(topo, tokenring.ObserveOptions{})
	if err != nil {
		return again, err
	}
	if !equalJSON(observed, st.Baselines) {
		st.Baselines = observed
		if err := store.save(ctx, st); err != nil {
			return again, err
		}
	}
	analysis, err := st.Baselines.Analyze(topo)
	if err != nil {
		return again, err
	}

	var needed []string
	byEndpoint := map[string]*member{}
	for i := range members {
		m := &members[i]
		byEndpoint[m.endpoint] = m
		if done[m.svc.Name] || slices.Contains(running, m.endpoint) {
			continue
		}
		if rec, ok := st.Jobs[m.svc.Name]; ok && !rec.Stopped && m.job == nil {
			continue // settleJobs keeps it running
		}
		if st.Attempts[m.svc.Name] >= r.cfg.MaxAttempts {
			continue // given up: its failed Job stays for a human
		}
		if cur := m.svc.Annotations[tokenring.CurrentTokenRingHashAnnotation]; cur != hash {
			continue // its sidecar has not seen the ring read: wait
		}
		v := tokenring.Decide(tokenring.Member{Name: m.svc.Name, Annotations: m.svc.Annotations, Endpoint: m.endpoint},
			status, tokenring.DecideOptions{Trigger: tokenring.TriggerOwnership, Analysis: &analysis})
		switch v.Action {
		case tokenring.ActionSeed, tokenring.ActionRecordCleanup:
			if err := r.annotate(ctx, &m.svc, v.TokenRingHash); err != nil {
				return again, err
			}
		case tokenring.ActionStartCleanup:
			needed = append(needed, m.endpoint)
		}
	}
	if len(needed) == 0 {
		return again, nil
	}
	sched, err := tokenring.NewScheduler(topo, r.cfg.Limits)
	if err != nil {
		return again, err
	}
	step, err := sched.Next(needed, running)
	if err != nil {
		return again, err
	}
	for _, ep := range step.Start {
		m := byEndpoint[ep]
		// The status Decide read is from the start of this pass, before
		// the nodes' APIs were read: read it again right before each Job,
		// with what the node itself sees, so that a cluster that started
		// scaling or lost a node meanwhile gets no new Job (the next pass
		// decides again).
		if err := r.clusterStable(ctx, ep); err != nil {
			logger.Info("cluster not stable right before the cleanup Job; not creating it", "member", m.svc.Name, "err", err.Error())
			return again, nil
		}
		// Write ahead: the record exists before the Job, so a restart
		// that finds the record and no Job stops the node's cleanups
		// before a neighbour starts.
		st.Jobs[m.svc.Name] = JobRecord{Endpoint: ep, Hash: hash, Topology: st.topologyIndex(topo)}
		if err := store.save(ctx, st); err != nil {
			return again, err
		}
		if err := r.c.Create(ctx, r.job(&m.svc, ep, hash)); err != nil && !apierrors.IsAlreadyExists(err) {
			return again, err
		}
		logger.Info("cleanup Job created", "member", m.svc.Name, "endpoint", ep, "tokenRingHash", hash)
	}
	return again, nil
}

// settleJobs handles every Job and every record: a succeeded Job is
// recorded (baseline, then the Service's annotation, then the Job is
// deleted); a failed Job's node has its cleanups stopped before anything
// else; a record without a Job (the controller stopped between writing
// one and creating the other, or someone deleted the Job) is treated as
// a failed Job. It returns the endpoints that count as cleaning and the
// members whose cleanup just finished (not to be started again in this
// pass).
func (r *Controller) settleJobs(ctx context.Context, members []member, st *State, store *stateStore) (running []string, done map[string]bool, err error) {
	done = map[string]bool{}
	for i := range members {
		m := &members[i]
		rec, hasRec := st.Jobs[m.svc.Name]
		switch {
		case m.job == nil && !hasRec:
			continue
		case m.job != nil && !hasRec:
			// A Job this controller did not record (or a record lost by
			// hand): its node may be cleaning; stop it before anything.
			rec = JobRecord{Endpoint: m.endpoint, Hash: m.job.Annotations[tokenring.CleanupJobTokenRingHashAnnotation], Topology: -1}
			if jobSucceeded(m.job) {
				// Cleaned, but for which topology is unknown: do not move
				// the baseline (the analysis may ask for one more
				// cleanup, never one fewer).
				if err := r.c.Delete(ctx, m.job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
					return nil, nil, err
				}
				done[m.svc.Name] = true
				continue
			}
		}
		switch {
		case m.job != nil && jobSucceeded(m.job):
			if !rec.Recorded {
				b, err := st.Baselines.RecordCleanup(rec.Endpoint, st.Topologies[rec.Topology])
				if err != nil {
					return nil, nil, err
				}
				st.Baselines, rec.Recorded = b, true
				st.Jobs[m.svc.Name] = rec
				delete(st.Attempts, m.svc.Name)
				if err := store.save(ctx, *st); err != nil {
					return nil, nil, err
				}
			}
			if err := r.annotate(ctx, &m.svc, m.job.Annotations[tokenring.CleanupJobTokenRingHashAnnotation]); err != nil {
				return nil, nil, err
			}
			if err := r.c.Delete(ctx, m.job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return nil, nil, err
			}
			delete(st.Jobs, m.svc.Name)
			if err := store.save(ctx, *st); err != nil {
				return nil, nil, err
			}
			done[m.svc.Name] = true
		case m.job != nil && !jobFailed(m.job):
			running = append(running, m.endpoint) // active
		case rec.Recorded:
			// Recorded, Job gone: only the bookkeeping is left.
			delete(st.Jobs, m.svc.Name)
			if err := store.save(ctx, *st); err != nil {
				return nil, nil, err
			}
			done[m.svc.Name] = true
		default:
			// Failed, or the record of a Job that is not there: ScyllaDB
			// may still be cleaning. Stop it; until that succeeds the
			// node counts as cleaning and holds its neighbours.
			if !rec.Stopped {
				if err := r.stopCleanups(ctx, m.endpoint); err != nil {
					log.FromContext(ctx).Info("stopping the cleanups of a failed Job's node failed; holding its neighbours", "member", m.svc.Name, "err", err.Error())
					running = append(running, m.endpoint)
					continue
				}
				st.Attempts[m.svc.Name]++
				rec.Stopped = true
				if rec.Topology >= 0 {
					st.Jobs[m.svc.Name] = rec
					if err := store.save(ctx, *st); err != nil {
						return nil, nil, err
					}
				}
			}
			if st.Attempts[m.svc.Name] >= r.cfg.MaxAttempts && m.job != nil {
				continue // given up: the failed Job stays
			}
			if m.job != nil {
				if err := r.c.Delete(ctx, m.job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
					return nil, nil, err
				}
			}
			delete(st.Jobs, m.svc.Name)
			if err := store.save(ctx, *st); err != nil {
				return nil, nil, err
			}
			done[m.svc.Name] = true // retried on a later pass, after the Job is gone
		}
	}
	return running, done, nil
}

// stopCleanups asks the node to stop its cleanup compactions.
func (r *Controller) stopCleanups(ctx context.Context, endpoint string) error {
	c, err := tokenring.NewClient(r.cfg.APIURL(endpoint), r.cfg.ClientOptions)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.StopCleanups(ctx)
}

// readTopology reads the ring and the replication from the first member
// whose API answers, and the hash of that ring; the hash read before and
// after must agree, or the ring changed meanwhile.
func (r *Controller) readTopology(ctx context.Context, members []member) (tokenring.Topology, string, error) {
	var errs []error
	for _, m := range members {
		c, err := tokenring.NewClient(r.cfg.APIURL(m.endpoint), r.cfg.ClientOptions)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		before, _, err := tokenring.ReadTokenRingHash(cctx, c)
		var topo tokenring.Topology
		if err == nil {
			topo, err = tokenring.ReadTopology(cctx, c, c, c)
		}
		var after string
		if err == nil {
			after, _, err = tokenring.ReadTokenRingHash(cctx, c)
		}
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.endpoint, err))
			continue
		}
		if before != after {
			return tokenring.Topology{}, "", fmt.Errorf("%s: the ring changed while it was read", m.endpoint)
		}
		return topo, before, nil
	}
	return tokenring.Topology{}, "", fmt.Errorf("no member's API answered: %w", errors.Join(errs...))
}

// members lists the member Services, sorted by name, with their Jobs.
func (r *Controller) members(ctx context.Context) ([]member, error) {
	var svcs corev1.ServiceList
	if err := r.reader.List(ctx, &svcs, client.InNamespace(r.cfg.Namespace),
		client.MatchingLabels{ClusterLabel: r.cfg.Cluster, ServiceTypeLabel: MemberServiceType}); err != nil {
		return nil, err
	}
	var jobs batchv1.JobList
	if err := r.reader.List(ctx, &jobs, client.InNamespace(r.cfg.Namespace),
		client.MatchingLabels{ClusterLabel: r.cfg.Cluster}, client.HasLabels{MemberLabel}); err != nil {
		return nil, err
	}
	jobOf := map[string]*batchv1.Job{}
	for i := range jobs.Items {
		if jobs.Items[i].DeletionTimestamp == nil {
			jobOf[jobs.Items[i].Labels[MemberLabel]] = &jobs.Items[i]
		}
	}
	out := make([]member, 0, len(svcs.Items))
	for _, svc := range svcs.Items {
		ep, err := r.cfg.EndpointOf(&svc)
		if err != nil {
			return nil, err
		}
		out = append(out, member{svc: svc, endpoint: ep, job: jobOf[svc.Name]})
	}
	slices.SortFunc(out, func(a, b member) int { return strings.Compare(a.svc.Name, b.svc.Name) })
	return out, nil
}

// annotate sets the Service's last-cleaned-up hash, if it differs.
func (r *Controller) annotate(ctx context.Context, svc *corev1.Service, hash string) error {
	if hash == "" || svc.Annotations[tokenring.LastCleanedUpTokenRingHashAnnotation] == hash {
		return nil
	}
	patch := client.MergeFrom(svc.DeepCopy())
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations[tokenring.LastCleanedUpTokenRingHashAnnotation] = hash
	return r.c.Patch(ctx, svc, patch)
}

// job builds a node's cleanup Job, named as scylla-operator names it.
func (r *Controller) job(svc *corev1.Service, endpoint, hash string) *batchv1.Job {
	api := r.cfg.APIURL(endpoint)
	var spec corev1.PodSpec
	if r.cfg.JobPodSpec != nil {
		spec = r.cfg.JobPodSpec(svc, api)
	} else {
		spec = corev1.PodSpec{Containers: []corev1.Container{{
			Name: "cleanup", Image: r.cfg.Image, Args: []string{"-api", api, "-run-cleanup", "-yes"},
		}}}
	}
	spec.RestartPolicy = corev1.RestartPolicyNever
	labels := map[string]string{
		ClusterLabel: r.cfg.Cluster, MemberLabel: svc.Name,
		DatacenterLabel: svc.Labels[DatacenterLabel], RackLabel: svc.Labels[RackLabel],
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: r.cfg.Namespace, Name: "cleanup-" + svc.Name, Labels: labels,
			Annotations: map[string]string{tokenring.CleanupJobTokenRingHashAnnotation: hash},
		},
		Spec: batchv1.JobSpec{
			// One attempt: a failure comes back here, which stops the
			// node's cleanups before anyone else starts.
			BackoffLimit: ptr.To[int32](0),
			Template:     corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

func jobSucceeded(j *batchv1.Job) bool {
	return conditionTrue(j, batchv1.JobComplete)
}

func jobFailed(j *batchv1.Job) bool {
	return conditionTrue(j, batchv1.JobFailed)
}

func conditionTrue(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// clusterStable reads the ScyllaCluster now, through the API reader, and
// then, through endpoint's REST API, the nodes it sees joining, leaving,
// moving and down (tokenring.Client.NodeStates). It returns nil only when
// the status meets every precondition of a cleanup
// (tokenring.ClusterPreconditions) and no node is changing the ring or
// down; an error wraps tokenring.ErrPreconditionUnmet when one does not
// hold, and is the read's error otherwise (a ScyllaCluster gone
// included).
func (r *Controller) clusterStable(ctx context.Context, endpoint string) error {
	sc := &unstructured.Unstructured{}
	sc.SetGroupVersionKind(ScyllaClusterGVK)
	if err := r.reader.Get(ctx, clusterKey(r.cfg), sc); err != nil {
		return fmt.Errorf("cleanupctrl: reading the ScyllaCluster again: %w", err)
	}
	status, err := clusterStatus(sc)
	if err != nil {
		return err
	}
	if err := tokenring.ClusterPreconditions(status); err != nil {
		return err
	}
	c, err := tokenring.NewClient(r.cfg.APIURL(endpoint), r.cfg.ClientOptions)
	if err != nil {
		return err
	}
	nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nodes, err := c.NodeStates(nctx)
	if err != nil {
		return fmt.Errorf("cleanupctrl: reading the node states from %s: %w", endpoint, err)
	}
	if nodes.Changing() || len(nodes.Down) > 0 {
		return fmt.Errorf("%w: %s sees nodes joining %v, leaving %v, moving %v, down %v",
			tokenring.ErrPreconditionUnmet, endpoint, nodes.Joining, nodes.Leaving, nodes.Moving, nodes.Down)
	}
	return nil
}

// clusterStatus reads what the preconditions need from a ScyllaCluster.
func clusterStatus(sc *unstructured.Unstructured) (tokenring.ClusterStatus, error) {
	s := tokenring.ClusterStatus{Generation: sc.GetGeneration()}
	if og, found, err := unstructured.NestedInt64(sc.Object, "status", "observedGeneration"); err != nil {
		return s, fmt.Errorf("ScyllaCluster %s status.observedGeneration: %w", sc.GetName(), err)
	} else if found {
		s.ObservedGeneration = &og
	}
	raw, _, err := unstructured.NestedSlice(sc.Object, "status", "conditions")
	if err != nil {
		return s, fmt.Errorf("ScyllaCluster %s status.conditions: %w", sc.GetName(), err)
	}
	for i, c := range raw {
		obj, ok := c.(map[string]any)
		if !ok {
			return s, fmt.Errorf("ScyllaCluster %s status.conditions[%d] is not an object", sc.GetName(), i)
		}
		var cond metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &cond); err != nil {
			return s, fmt.Errorf("ScyllaCluster %s status.conditions[%d]: %w", sc.GetName(), i, err)
		}
		s.Conditions = append(s.Conditions, cond)
	}
	return s, nil
}

func clusterKey(cfg Config) ktypes.NamespacedName {
	return ktypes.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Cluster}
}

// equalJSON compares two records as they are stored.
func equalJSON(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(x) == string(y)
}
