package cleanupctrl_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/caretaker-storage/caretaker/examples/scylla-operator/cleanupctrl"
	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// policy says what the playing Job controller does with an active Job of
// endpoint (attempt counts its Jobs, from 1) that it has seen for age:
// finish it now or not, and with success or failure.
type policy func(endpoint string, attempt int, age time.Duration) (finish, succeed bool)

// afterAWhile finishes every Job with success once it ran 300 ms, so that
// the controller has time to start the Jobs that may run beside it.
func afterAWhile(string, int, time.Duration) (bool, bool) { return true, true }

// player plays the Job controller and watches every moment for the rules:
// no two active Jobs whose nodes share a range, all active Jobs in one
// rack, at most limit of them.
type player struct {
	w      *world
	sched  *tokenring.Scheduler // of the ring the Jobs clean for
	limit  int
	policy policy

	mu         sync.Mutex
	seen       map[string]time.Time // Job UID → first seen
	attempts   map[string]int       // endpoint → Jobs seen
	order      []string             // endpoints, in the order their Jobs appeared
	waves      [][]string           // each distinct set of active Jobs
	violations []string
	onNew      func(endpoint string)
	stop       chan struct{}
	done       chan struct{}
}

func (w *world) play(sched *tokenring.Scheduler, limit int, p policy) *player {
	pl := &player{w: w, sched: sched, limit: limit, policy: p, seen: map[string]time.Time{}, attempts: map[string]int{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go pl.loop()
	w.t.Cleanup(pl.halt)
	return pl
}

func (p *player) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
		<-p.done
	}
}

// reset forgets what was seen so far.
func (p *player) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts, p.order, p.waves = map[string]int{}, nil, nil
}

func (p *player) setScheduler(s *tokenring.Scheduler) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sched = s
}

func (p *player) loop() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case <-time.After(30 * time.Millisecond):
		}
		p.step()
	}
}

func (p *player) step() {
	var list batchv1.JobList
	if err := p.w.c.List(context.Background(), &list, client.InNamespace(p.w.ns), client.HasLabels{cleanupctrl.MemberLabel}); err != nil {
		return // the API server is shutting down at the end of a test
	}
	p.mu.Lock()
	var active []string
	var finish []*batchv1.Job
	var succeed []bool
	racks := map[string]bool{}
	for i := range list.Items {
		j := &list.Items[i]
		if j.DeletionTimestamp != nil || finished(j) {
			continue
		}
		ep := p.w.endpointOfMember(j.Labels[cleanupctrl.MemberLabel])
		first, ok := p.seen[string(j.UID)]
		if !ok {
			first = time.Now()
			p.seen[string(j.UID)] = first
			p.attempts[ep]++
			p.order = append(p.order, ep)
			if p.onNew != nil {
				p.onNew(ep)
			}
		}
		active = append(active, ep)
		racks[j.Labels[cleanupctrl.RackLabel]] = true
		if age := time.Since(first); age >= 300*time.Millisecond {
			if f, s := p.policy(ep, p.attempts[ep], age); f {
				finish, succeed = append(finish, j), append(succeed, s)
			}
		}
	}
	slices.Sort(active)
	if len(active) > 0 && (len(p.waves) == 0 || !slices.Equal(p.waves[len(p.waves)-1], active)) {
		p.waves = append(p.waves, active)
		if len(racks) > 1 {
			p.violations = append(p.violations, fmt.Sprintf("Jobs %v run in %d racks at once", active, len(racks)))
		}
		if len(active) > p.limit {
			p.violations = append(p.violations, fmt.Sprintf("%d Jobs %v run at once, limit %d", len(active), active, p.limit))
		}
		for a := range active {
			for b := a + 1; b < len(active); b++ {
				if p.sched == nil {
					p.violations = append(p.violations, fmt.Sprintf("Jobs %v before the ring changed", active))
					break
				}
				if shared, err := p.sched.Conflicts(active[a], active[b]); err != nil || shared {
					p.violations = append(p.violations, fmt.Sprintf("%s and %s share a range and clean at once (%v)", active[a], active[b], err))
				}
			}
		}
	}
	p.mu.Unlock()
	for i, j := range finish {
		p.w.finishJob(j, succeed[i])
	}
}

func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func (p *player) report() (order []string, attempts map[string]int, waves [][]string, violations []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.order), p.attemptsCopy(), slices.Clone(p.waves), slices.Clone(p.violations)
}

func (p *player) attemptsCopy() map[string]int {
	out := map[string]int{}
	for k, v := range p.attempts {
		out[k] = v
	}
	return out
}

// steady waits until every node of the world's nine is recorded clean for
// their ring with no Job left: the first controller to see a cluster with
// data cleans every node once (nothing says in which order they joined,
// so each may hold ranges a later one took). Then it forgets what the
// player and the fakes saw, so that the test counts what comes next.
func steady(t *testing.T, w *world, p *player, arm func()) {
	t.Helper()
	nine := tokenringtest.RackedCluster(9)
	w.waitFor("the nine nodes recorded clean for their ring", func() bool {
		return w.allCleanedUpTo(tokenring.HashTokens(nine.Tokens())) && len(w.jobs()) == 0
	})
	p.reset()
	w.resetCleaned()
	if arm != nil {
		arm()
	}
}

// scaleOut brings a world of RackedCluster(9) to the steady state and
// scales it to 12. It returns the nodes that lost ranges, by the analysis
// computed here, independently, and the new ring's hash.
func scaleOut(t *testing.T, w *world, p *player, arm func()) (want []string, hash12 string) {
	t.Helper()
	steady(t, w, p, arm)
	before := w.topology()
	twelve := tokenringtest.RackedCluster(12)
	w.setCluster(twelve)
	after := w.topology()
	sched, err := tokenring.NewScheduler(after, tokenring.ScheduleLimits{})
	if err != nil {
		t.Fatal(err)
	}
	p.setScheduler(sched)
	a, err := tokenring.Analyze(before, after)
	if err != nil {
		t.Fatal(err)
	}
	return a.NeedsCleanup(), tokenring.HashTokens(twelve.Tokens())
}

// TestScaleOutNineToTwelveInRackWaves: a 9-node, 3-rack cluster scaled to
// 12 gets cleanup Jobs for exactly the nodes that lost ranges, in rack
// waves, never two replicas of one range at once; the three new nodes,
// which only gained ranges, get none.
func TestScaleOutNineToTwelveInRackWaves(t *testing.T) {
	w := newWorld(t, tokenringtest.RackedCluster(9))
	p := w.play(w.scheduler(), 6, afterAWhile)
	w.startController(tokenring.ScheduleLimits{})
	want, hash12 := scaleOut(t, w, p, nil)
	w.waitFor("every node recorded clean for the 12-node ring", func() bool { return w.allCleanedUpTo(hash12) })

	order, attempts, waves, violations := p.report()
	for _, v := range violations {
		t.Error(v)
	}
	got := slices.Sorted(maps(attempts))
	if !slices.Equal(got, want) {
		t.Fatalf("Jobs for %v, want exactly the nodes that lost ranges %v", got, want)
	}
	for ep, n := range attempts {
		if n != 1 {
			t.Errorf("%s got %d Jobs", ep, n)
		}
	}
	for _, ep := range []string{"10.0.0.10", "10.0.0.11", "10.0.0.12"} {
		if attempts[ep] != 0 {
			t.Errorf("new node %s, which only gained ranges, got a Job", ep)
		}
	}
	cleaned := w.cleanedCounts()
	for _, ep := range want {
		if cleaned[ep] != 1 {
			t.Errorf("%s cleaned shop %d times, want 1", ep, cleaned[ep])
		}
	}
	if len(waves) < 2 {
		t.Errorf("waves %v: want the racks one after another", waves)
	}
	t.Logf("Jobs in order %v; active sets seen %v", order, waves)
}

// TestReplicationDecreaseGetsCleanups: the ring does not change (nor its
// hash), shop goes from 3 replicas in dc1 to 2: the nodes that lost
// replicas get a Job, once.
func TestReplicationDecreaseGetsCleanups(t *testing.T) {
	nine := tokenringtest.RackedCluster(9)
	w := newWorld(t, nine)
	before := w.topology()
	sched, err := tokenring.NewScheduler(before, tokenring.ScheduleLimits{})
	if err != nil {
		t.Fatal(err)
	}
	p := w.play(sched, 6, afterAWhile)
	w.startController(tokenring.ScheduleLimits{})
	steady(t, w, p, nil)

	rf2 := nine.Clone()
	rf2.Keyspaces[0].Replication.Datacenters["dc1"] = 2
	w.setCluster(rf2)
	after := w.topology()
	a, err := tokenring.Analyze(before, after)
	if err != nil {
		t.Fatal(err)
	}
	want := a.NeedsCleanup()
	if len(want) == 0 {
		t.Fatal("the analysis finds no node that lost a replica")
	}
	w.waitFor("a cleanup of every node that lost replicas", func() bool {
		c := w.cleanedCounts()
		for _, ep := range want {
			if c[ep] == 0 {
				return false
			}
		}
		return len(w.jobs()) == 0
	})
	// Give the controller a few more passes (Resync is 200 ms): a second
	// Job for a node already cleaned would show here.
	time.Sleep(time.Second)
	_, attempts, _, violations := p.report()
	for _, v := range violations {
		t.Error(v)
	}
	if got := slices.Sorted(maps(attempts)); !slices.Equal(got, want) {
		t.Fatalf("Jobs for %v, want %v", got, want)
	}
	for ep, n := range attempts {
		if n != 1 {
			t.Errorf("%s got %d Jobs after one replication decrease", ep, n)
		}
	}
}

// TestFailedJobHoldsItsNeighbours: a node's Job fails and stopping its
// cleanups fails too: no node that shares a range with it starts until the
// stop went through; then it is retried and everything finishes.
func TestFailedJobHoldsItsNeighbours(t *testing.T) {
	w := newWorld(t, tokenringtest.RackedCluster(9))
	var mu sync.Mutex
	var victim string
	armed := false
	stopsBefore := 0
	failedAt := time.Time{}
	p := w.play(w.scheduler(), 6, func(ep string, attempt int, _ time.Duration) (bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		if armed && victim == "" {
			victim = ep
			stopsBefore = w.fake(ep).Node().StopCalls() // the player's own cleanups stop first
			// ScyllaDB answers the stop with an error for now.
			w.fake(ep).Override("POST", "/compaction_manager/stop_compaction", 500, `{"message":"injected","code":500}`)
			failedAt = time.Now()
			return true, false
		}
		return true, true
	})
	type start struct {
		ep    string
		stops int
	}
	var starts []start
	p.mu.Lock()
	p.onNew = func(ep string) {
		mu.Lock()
		defer mu.Unlock()
		if victim != "" && ep != victim {
			starts = append(starts, start{ep, w.fake(victim).Node().StopCalls() - stopsBefore})
		}
	}
	p.mu.Unlock()
	w.startController(tokenring.ScheduleLimits{})
	_, hash12 := scaleOut(t, w, p, func() { mu.Lock(); armed = true; mu.Unlock() })

	w.waitFor("the victim's Job to fail", func() bool { mu.Lock(); defer mu.Unlock(); return !failedAt.IsZero() })
	// While the stop fails, the victim counts as cleaning: a few passes.
	time.Sleep(time.Second)
	mu.Lock()
	v, before := victim, stopsBefore
	mu.Unlock()
	if w.fake(v).Node().StopCalls() != before {
		t.Fatal("the stop went through although it failed")
	}
	w.fake(v).Override("POST", "/compaction_manager/stop_compaction", 0, "")
	w.waitFor("every node recorded clean for the 12-node ring", func() bool { return w.allCleanedUpTo(hash12) })

	_, attempts, _, violations := p.report()
	for _, x := range violations {
		t.Error(x)
	}
	if attempts[v] != 2 {
		t.Errorf("victim %s got %d Jobs, want 2 (one failed, one retried)", v, attempts[v])
	}
	p.halt()
	mu.Lock()
	defer mu.Unlock()
	neighbours := 0
	for _, s := range starts {
		shared, err := p.sched.Conflicts(v, s.ep)
		if err != nil {
			t.Fatal(err)
		}
		if shared {
			neighbours++
			if s.stops == 0 {
				t.Errorf("%s, which shares ranges with the failed %s, started before %s's cleanups were stopped", s.ep, v, v)
			}
		}
	}
	if neighbours == 0 {
		t.Errorf("no neighbour of %s started after it failed: the test proves nothing (starts %v)", v, starts)
	}
}

// TestRestartMidWaveResumes: the controller is stopped while a wave runs,
// one Job of it done and recorded, the others finishing while no
// controller runs; a new controller records them and goes on, and no node
// is cleaned twice.
func TestRestartMidWaveResumes(t *testing.T) {
	w := newWorld(t, tokenringtest.RackedCluster(9))
	var mu sync.Mutex
	release := map[string]bool{"*": true} // until the scale-out
	p := w.play(w.scheduler(), 6, func(ep string, _ int, _ time.Duration) (bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		return release[ep] || release["*"], true
	})
	stop := w.startController(tokenring.ScheduleLimits{})
	want, hash12 := scaleOut(t, w, p, func() { mu.Lock(); release["*"] = false; mu.Unlock() })

	var wave []string
	w.waitFor("the first wave", func() bool {
		var active []string
		for _, j := range w.jobs() {
			active = append(active, w.endpointOfMember(j.Labels[cleanupctrl.MemberLabel]))
		}
		wave = active
		return len(active) >= 2
	})
	slices.Sort(wave)
	first := wave[0]
	mu.Lock()
	release[first] = true
	mu.Unlock()
	w.waitFor(first+"'s success recorded", func() bool {
		return w.service(first).Annotations[tokenring.LastCleanedUpTokenRingHashAnnotation] == hash12
	})
	stop()
	// The rest of the wave finishes while no controller runs: every Job
	// there is now, since the controller may have started the wave's last
	// node after the wave above was sampled (a wave of three seen as two).
	mu.Lock()
	for _, ep := range wave[1:] {
		release[ep] = true
	}
	for _, j := range w.jobs() {
		release[w.endpointOfMember(j.Labels[cleanupctrl.MemberLabel])] = true
	}
	mu.Unlock()
	w.waitFor("the rest of the wave to finish", func() bool {
		for _, j := range w.jobs() {
			if !finished(&j) {
				return false
			}
		}
		return true
	})
	mu.Lock()
	release["*"] = true
	mu.Unlock()
	w.startController(tokenring.ScheduleLimits{})
	w.waitFor("every node recorded clean for the 12-node ring", func() bool { return w.allCleanedUpTo(hash12) })

	_, attempts, _, violations := p.report()
	for _, v := range violations {
		t.Error(v)
	}
	if got := slices.Sorted(maps(attempts)); !slices.Equal(got, want) {
		t.Fatalf("Jobs for %v, want %v", got, want)
	}
	cleaned := w.cleanedCounts()
	for ep, n := range cleaned {
		if n > 1 {
			t.Errorf("%s cleaned %d times across the restart", ep, n)
		}
	}
	for ep, n := range attempts {
		if n != 1 {
			t.Errorf("%s got %d Jobs across the restart", ep, n)
		}
	}
	t.Logf("wave cut by the restart: %v (%s done before it)", wave, first)
}

func maps(m map[string]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// clusterReads counts the controller's reads of the ScyllaCluster and
// calls after once after the first.
type clusterReads struct {
	client.Reader
	after func()

	mu    sync.Mutex
	reads int
}

func (r *clusterReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == cleanupctrl.ScyllaClusterGVK.Kind {
		r.mu.Lock()
		r.reads++
		first := r.reads == 1
		r.mu.Unlock()
		if first && r.after != nil {
			r.after()
		}
	}
	return err
}

func (r *clusterReads) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads
}

// setNodeDown writes a ScyllaCluster status with a node down (Available
// False, Degraded True), as scylla-operator does when a pod is not ready.
func (w *world) setNodeDown(ctx context.Context) error {
	sc := &unstructured.Unstructured{}
	sc.SetGroupVersionKind(cleanupctrl.ScyllaClusterGVK)
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "basic"}, sc); err != nil {
		return err
	}
	now := time.Now().UTC().Format(time.RFC3339)
	cond := func(t, s string) map[string]any {
		return map[string]any{"type": t, "status": s, "reason": "NodeDown", "message": "", "lastTransitionTime": now, "observedGeneration": sc.GetGeneration()}
	}
	sc.Object["status"] = map[string]any{
		"observedGeneration": sc.GetGeneration(),
		"conditions":         []any{cond("StatefulSetControllerProgressing", "False"), cond("Available", "False"), cond("Degraded", "True")},
	}
	return w.c.Status().Update(ctx, sc)
}

// TestNoJobWhileANodeWentDownDuringThePass: the controller reads a stable
// ScyllaCluster at the start of its pass, then a node goes down (Degraded)
// while it reads the nodes' APIs. Every node needs a cleanup (recorded
// never cleaned up), yet no Job is created from the stale status, nor in
// the passes after while the cluster stays degraded; once it is stable
// again, Jobs start.
func TestNoJobWhileANodeWentDownDuringThePass(t *testing.T) {
	w := newWorld(t, tokenringtest.RackedCluster(9))
	for _, n := range tokenringtest.RackedCluster(9).Nodes {
		svc := w.service(n.Endpoint)
		patch := client.MergeFrom(svc.DeepCopy())
		svc.Annotations[tokenring.LastCleanedUpTokenRingHashAnnotation] = tokenring.NeverCleanedUp
		if err := w.c.Patch(context.Background(), svc, patch); err != nil {
			t.Fatal(err)
		}
	}
	downErr := make(chan error, 1)
	reads := &clusterReads{}
	reads.after = func() { downErr <- w.setNodeDown(context.Background()) }
	w.startControllerWith(tokenring.ScheduleLimits{}, func(r client.Reader) client.Reader {
		reads.Reader = r
		return reads
	})
	select {
	case err := <-downErr:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the controller never read the ScyllaCluster")
	}
	// Several passes (a pass reads the ScyllaCluster at least once).
	w.waitFor("five more passes over the degraded cluster", func() bool { return reads.count() >= 6 })
	if jobs := w.jobs(); len(jobs) > 0 {
		var names []string
		for _, j := range jobs {
			names = append(names, j.Name)
		}
		t.Fatalf("Jobs %v created while a node was down", names)
	}
	w.setStable(true)
	w.waitFor("a cleanup Job once the cluster is stable again", func() bool { return len(w.jobs()) > 0 })
}

// TestNoJobWhileANodeJoinsDuringThePass: as above, but what changes after
// the pass read the ScyllaCluster is what the nodes see: 10.0.0.10 starts
// joining (the nodes list it in /storage_service/nodes/joining; its
// tokens are not in the ring, so the ring and its hash are unchanged).
// No Job is created while it joins; once it is gone, Jobs start.
func TestNoJobWhileANodeJoinsDuringThePass(t *testing.T) {
	nine := tokenringtest.RackedCluster(9)
	w := newWorld(t, nine)
	for _, n := range nine.Nodes {
		svc := w.service(n.Endpoint)
		patch := client.MergeFrom(svc.DeepCopy())
		svc.Annotations[tokenring.LastCleanedUpTokenRingHashAnnotation] = tokenring.NeverCleanedUp
		if err := w.c.Patch(context.Background(), svc, patch); err != nil {
			t.Fatal(err)
		}
	}
	joining := func(join bool) {
		for _, n := range nine.Nodes {
			w.fake(n.Endpoint).Node().Update(func(c *tokenringtest.Cluster) {
				c.Nodes = slices.DeleteFunc(c.Nodes, func(n tokenringtest.Node) bool { return n.Endpoint == "10.0.0.10" })
				if join {
					c.Nodes = append(c.Nodes, tokenringtest.Node{Endpoint: "10.0.0.10", HostID: "host-10", Datacenter: "dc1", Rack: "r1"})
				}
			})
		}
	}
	joined := make(chan struct{})
	reads := &clusterReads{after: func() { joining(true); close(joined) }}
	w.startControllerWith(tokenring.ScheduleLimits{}, func(r client.Reader) client.Reader {
		reads.Reader = r
		return reads
	})
	select {
	case <-joined:
	case <-time.After(waitTimeout):
		t.Fatal("the controller never read the ScyllaCluster")
	}
	w.waitFor("five more passes while 10.0.0.10 joins", func() bool { return reads.count() >= 6 })
	if jobs := w.jobs(); len(jobs) > 0 {
		var names []string
		for _, j := range jobs {
			names = append(names, j.Name)
		}
		t.Fatalf("Jobs %v created while a node was joining", names)
	}
	joining(false)
	w.waitFor("a cleanup Job once no node joins", func() bool { return len(w.jobs()) > 0 })
}
