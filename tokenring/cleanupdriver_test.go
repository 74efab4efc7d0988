package tokenring

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// fakeCluster gives each node a Cleaner that models ScyllaDB's cleanup as
// the driver sees it: a node is cleaning from its first keyspace cleanup
// until its last keyspace returns, or until StopCleanups aborts it. A run
// cut short by its context, or whose connection drops (lost), keeps the
// node cleaning, as ScyllaDB goes on after its client left, until the
// node's next successful StopCleanups. Every start checks, against the
// naive reference, that no node sharing a range is cleaning at that
// moment.
type fakeCluster struct {
	conflicts map[[2]string]bool
	keyspaces []string
	hold      time.Duration // real time each keyspace takes

	mu         sync.Mutex
	cleaning   map[string]bool
	violations []string
	stops      map[string]int // StopCleanups calls per node
	cleaned    map[string]int // runs that reached their last keyspace without a failure there
	fail       map[string]int // keyspace failures still to inject, per node
	lost       map[string]int // lost connections still to inject (on the last keyspace), per node: the node keeps cleaning
	stopFail   map[string]int // StopCleanups failures still to inject, per node
	maxAtOnce  int
}

func newFakeCluster(topo Topology) *fakeCluster {
	return &fakeCluster{conflicts: refConflicts(topo, AcrossDatacenters), keyspaces: []string{"shop", "logs"}, hold: 2 * time.Millisecond,
		cleaning: map[string]bool{}, stops: map[string]int{}, cleaned: map[string]int{}, fail: map[string]int{},
		lost: map[string]int{}, stopFail: map[string]int{}}
}

func (f *fakeCluster) cleanerFor(ep string) (Cleaner, error) {
	return &fakeNodeCleaner{f: f, ep: ep}, nil
}

type fakeNodeCleaner struct {
	f  *fakeCluster
	ep string
}

func (c *fakeNodeCleaner) StopCleanups(ctx context.Context) error {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops[c.ep]++
	if f.stopFail[c.ep] > 0 && f.cleaning[c.ep] { // stopping a running cleanup fails
		f.stopFail[c.ep]--
		return &APIError{Method: "POST", Path: "/compaction_manager/stop_compaction", StatusCode: 503, Message: "injected"}
	}
	delete(f.cleaning, c.ep)
	return nil
}

// begin marks the node cleaning, checking that no node sharing a range
// is. f.mu is held.
func (f *fakeCluster) begin(ep string) {
	if f.cleaning[ep] {
		return
	}
	for other := range f.cleaning {
		if f.conflicts[[2]string{ep, other}] {
			f.violations = append(f.violations, fmt.Sprintf("%s started while %s, which shares a range, was cleaning", ep, other))
		}
	}
	f.cleaning[ep] = true
	f.maxAtOnce = max(f.maxAtOnce, len(f.cleaning))
}

func (c *fakeNodeCleaner) CleanupKeyspaces(ctx context.Context) ([]string, error) {
	return slices.Clone(c.f.keyspaces), nil
}

func (c *fakeNodeCleaner) CleanupKeyspace(ctx context.Context, ks string) error {
	f := c.f
	f.mu.Lock()
	f.begin(c.ep)
	if f.lost[c.ep] > 0 && ks == f.keyspaces[len(f.keyspaces)-1] {
		f.lost[c.ep]--
		f.mu.Unlock()
		return errors.New("connection reset by peer") // the node goes on cleaning
	}
	f.mu.Unlock()
	select {
	case <-ctx.Done():
		return ctx.Err() // the node goes on cleaning: f.cleaning keeps it
	case <-time.After(f.hold):
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	last := ks == f.keyspaces[len(f.keyspaces)-1]
	if f.fail[c.ep] > 0 {
		f.fail[c.ep]--
		if last {
			delete(f.cleaning, c.ep)
		}
		return &APIError{Method: "POST", Path: "/storage_service/keyspace_cleanup/" + ks, StatusCode: 500, Message: "injected"}
	}
	if last {
		delete(f.cleaning, c.ep)
		f.cleaned[c.ep]++
	}
	return nil
}

func (f *fakeCluster) check(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.violations) > 0 {
		t.Fatalf("replicas of one range cleaned together:\n%s", strings.Join(f.violations, "\n"))
	}
}

// TestFakeClusterSeesOverlap: the harness itself catches the naive "all
// at once", so its silence below means something.
func TestFakeClusterSeesOverlap(t *testing.T) {
	f := newFakeCluster(racked9())
	var wg sync.WaitGroup
	for _, ep := range all9() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _ := f.cleanerFor(ep)
			_, _ = RunCleanup(context.Background(), c)
		}()
	}
	wg.Wait()
	if len(f.violations) == 0 {
		t.Fatal("nine cleanups at once and the harness saw no overlap")
	}
}

func TestCleanupDriverRunsNineNodes(t *testing.T) {
	topo := racked9()
	f := newFakeCluster(topo)
	s := mustScheduler(t, topo, ScheduleLimits{})
	store := &MemCleanupStateStore{}
	var logs bytes.Buffer
	var events []CleanupEvent
	d, err := NewCleanupDriver(CleanupDriverOptions{
		Scheduler: s, CleanerFor: f.cleanerFor, Store: store,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Hooks:  CleanupHooksFunc(func(e CleanupEvent) { events = append(events, e) }),
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := d.Run(context.Background(), all9())
	if err != nil {
		t.Fatal(err)
	}
	f.check(t)
	if !slices.Equal(rep.Done, all9()) || len(rep.Failed) != 0 {
		t.Fatalf("report %+v", rep)
	}
	for _, ep := range all9() {
		if f.cleaned[ep] != 1 || f.stops[ep] != 1 {
			t.Errorf("%s cleaned %d times, stopped %d times; want once", ep, f.cleaned[ep], f.stops[ep])
		}
	}
	if f.maxAtOnce > 3 {
		t.Errorf("%d cleaning at once; a rack has 3 nodes", f.maxAtOnce)
	}
	st, _ := store.Load(context.Background())
	if !slices.Equal(st.Done, all9()) || len(st.Running) != 0 {
		t.Fatalf("state %+v", st)
	}
	if len(events) != 9 || events[0].Outcome != CleanupDone {
		t.Fatalf("events %+v", events)
	}
	for _, want := range []string{"tokenring: cleanup started", "tokenring: cleanup done", "tokenring: cleanup held", "reason=ReplicaBusy"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// waitFor polls cond, stepping the fake clock whenever the driver waits
// on it, for at most a few seconds of real time.
func waitFor(t *testing.T, fc *clocktesting.FakeClock, step time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		if fc != nil && fc.HasWaiters() {
			fc.Step(step)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCleanupDriverRetriesAFailure(t *testing.T) {
	topo := racked9()
	f := newFakeCluster(topo)
	f.fail["n4"] = 1 // the first attempt fails one keyspace
	fc := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	store := &MemCleanupStateStore{}
	var mu sync.Mutex
	var events []CleanupEvent
	d, err := NewCleanupDriver(CleanupDriverOptions{
		Scheduler: mustScheduler(t, topo, ScheduleLimits{}), CleanerFor: f.cleanerFor, Store: store,
		Clock: fc, Backoff: CleanupBackoff{Initial: time.Minute},
		Hooks: CleanupHooksFunc(func(e CleanupEvent) { mu.Lock(); events = append(events, e); mu.Unlock() }),
	})
	if err != nil {
		t.Fatal(err)
	}
	type out struct {
		rep CleanupRunReport
		err error
	}
	ch := make(chan out, 1)
	go func() { rep, err := d.Run(context.Background(), all9()); ch <- out{rep, err} }()
	var res out
	waitFor(t, fc, time.Minute, func() bool {
		select {
		case res = <-ch:
			return true
		default:
			return false
		}
	})
	if res.err != nil {
		t.Fatal(res.err)
	}
	f.check(t)
	// n4: two attempts, each starting with StopCleanups, and one stop
	// after the failed one so that its neighbours need not wait for it.
	if res.rep.Attempts["n4"] != 2 || f.stops["n4"] != 3 || !slices.Equal(res.rep.Done, all9()) {
		t.Fatalf("report %+v, n4 stopped %d times, want 3", res.rep, f.stops["n4"])
	}
	var retry *CleanupEvent
	for i := range events {
		if events[i].Outcome == CleanupRetry {
			retry = &events[i]
		}
	}
	var apiErr *APIError
	if retry == nil || retry.Endpoint != "n4" || !errors.As(retry.Err, &apiErr) || retry.Report.Failed["shop"] == nil {
		t.Fatalf("no retry event for n4: %+v", events)
	}
}

func TestCleanupDriverGivesUp(t *testing.T) {
	topo := racked9()
	f := newFakeCluster(topo)
	f.fail["n2"] = 100
	fc := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	d, err := NewCleanupDriver(CleanupDriverOptions{Scheduler: mustScheduler(t, topo, ScheduleLimits{}), CleanerFor: f.cleanerFor, Store: &MemCleanupStateStore{}, Clock: fc, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var rep CleanupRunReport
	go func() { rep, err = d.Run(context.Background(), all9()); close(done) }()
	waitFor(t, fc, time.Hour, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	if err == nil || rep.Failed["n2"] == nil || rep.Attempts["n2"] != 2 || slices.Contains(rep.Done, "n2") || len(rep.Done) != 8 {
		t.Fatalf("report %+v, err %v", rep, err)
	}
	if !strings.Contains(err.Error(), "node n2, 2 attempts") {
		t.Fatalf("err %v", err)
	}
	f.check(t)
}

// TestCleanupDriverResumesAfterRestart stops a run after four nodes are
// done, while others run, and starts a new driver on the same store: the
// done nodes are not cleaned again, the interrupted ones are re-run
// before anything that shares a range with them starts (the fake keeps
// them cleaning until then), and every node ends done.
func TestCleanupDriverResumesAfterRestart(t *testing.T) {
	topo := racked9()
	f := newFakeCluster(topo)
	s := mustScheduler(t, topo, ScheduleLimits{MaxPerDatacenter: 2})
	store := &MemCleanupStateStore{}
	ctx, cancel := context.WithCancel(context.Background())
	doneCount := 0
	d1, err := NewCleanupDriver(CleanupDriverOptions{Scheduler: s, CleanerFor: f.cleanerFor, Store: store, Hooks: CleanupHooksFunc(func(e CleanupEvent) {
		if e.Outcome == CleanupDone {
			if doneCount++; doneCount == 4 {
				cancel()
			}
		}
	})})
	if err != nil {
		t.Fatal(err)
	}
	rep1, err := d1.Run(ctx, all9())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}
	st, _ := store.Load(context.Background())
	if len(st.Done) < 4 || len(st.Running) == 0 || !slices.Equal(st.Done, rep1.Done) {
		t.Fatalf("state after the stop %+v (report %+v): want 4 or more done and some running", st, rep1)
	}
	// Every node still cleaning is recorded running (one recorded running
	// may not have begun its first keyspace yet).
	f.mu.Lock()
	for ep := range f.cleaning {
		if !slices.Contains(st.Running, ep) {
			t.Errorf("%s is cleaning but not recorded running", ep)
		}
	}
	f.mu.Unlock()
	doneBefore := slices.Clone(st.Done)

	d2, err := NewCleanupDriver(CleanupDriverOptions{Scheduler: s, CleanerFor: f.cleanerFor, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	rep2, err := d2.Run(context.Background(), all9())
	if err != nil {
		t.Fatal(err)
	}
	f.check(t)
	if !slices.Equal(rep2.Done, all9()) {
		t.Fatalf("second run done %v", rep2.Done)
	}
	for _, ep := range doneBefore {
		if rep2.Attempts[ep] != 0 || f.stops[ep] != 1 {
			t.Errorf("%s was done before the restart and ran again (%d attempts, %d starts)", ep, rep2.Attempts[ep], f.stops[ep])
		}
	}
	for _, ep := range st.Running {
		if rep2.Attempts[ep] != 1 {
			t.Errorf("%s was running at the restart: %d attempts, want a re-run", ep, rep2.Attempts[ep])
		}
	}
	final, _ := store.Load(context.Background())
	if !slices.Equal(final.Done, all9()) || len(final.Running) != 0 {
		t.Fatalf("final state %+v", final)
	}
}

// TestCleanupDriverHonoursCancellation: a Run whose context ends returns
// promptly with ctx's error, leaves nothing running in its goroutines,
// and keeps the interrupted nodes recorded as running.
func TestCleanupDriverHonoursCancellation(t *testing.T) {
	topo := racked9()
	f := newFakeCluster(topo)
	f.hold = time.Hour // cleanups never finish by themselves
	store := &MemCleanupStateStore{}
	d, err := NewCleanupDriver(CleanupDriverOptions{Scheduler: mustScheduler(t, topo, ScheduleLimits{}), CleanerFor: f.cleanerFor, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := d.Run(ctx, all9()); errc <- err }()
	waitFor(t, nil, 0, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.cleaning) == 3 })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	st, _ := store.Load(context.Background())
	if !slices.Equal(st.Running, []string{"n1", "n4", "n7"}) || len(st.Done) != 0 {
		t.Fatalf("state %+v", st)
	}
	f.check(t)
}

func TestCleanupDriverRejectsUnknownNodesAndUnprovenRuns(t *testing.T) {
	s := mustScheduler(t, racked9(), ScheduleLimits{})
	d, err := NewCleanupDriver(CleanupDriverOptions{Scheduler: s, CleanerFor: newFakeCluster(racked9()).cleanerFor, Store: &MemCleanupStateStore{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Run(context.Background(), []string{"n1", "ghost"}); !errors.Is(err, ErrUnknownEndpoint) {
		t.Fatalf("Run with an unknown node: %v", err)
	}
	bad := &MemCleanupStateStore{}
	_ = bad.Save(context.Background(), CleanupState{Running: []string{"ghost"}})
	d, err = NewCleanupDriver(CleanupDriverOptions{Scheduler: s, CleanerFor: newFakeCluster(racked9()).cleanerFor, Store: bad})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Run(context.Background(), []string{"n1"}); !errors.Is(err, ErrUnknownEndpoint) {
		t.Fatalf("Run with an unknown node in the state: %v", err)
	}

	// A panicking Cleaner is a failed attempt, not a crashed run.
	panicky := func(string) (Cleaner, error) { return panickyCleaner{}, nil }
	d, err = NewCleanupDriver(CleanupDriverOptions{Scheduler: s, CleanerFor: panicky, Store: &MemCleanupStateStore{}, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := d.Run(context.Background(), []string{"n1"})
	if err == nil || !strings.Contains(err.Error(), "panicked") || len(rep.Done) != 0 || rep.Failed["n1"] == nil {
		t.Fatalf("panicking cleaner: %+v, %v", rep, err)
	}
	// A nil Cleaner or a factory error fails the attempt too.
	for _, factory := range []CleanerFor{
		func(string) (Cleaner, error) { return nil, nil },
		func(string) (Cleaner, error) { return nil, errors.New("no route to node") },
	} {
		var err error
		d, err = NewCleanupDriver(CleanupDriverOptions{Scheduler: s, CleanerFor: factory, Store: &MemCleanupStateStore{}, MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		if rep, err := d.Run(context.Background(), []string{"n1"}); err == nil || len(rep.Done) != 0 {
			t.Fatalf("bad factory: %+v, %v", rep, err)
		}
	}
}

// TestOnlyAProvenReportCounts: a report that lists a keyspace it neither
// cleaned nor dropped is not a done cleanup.
func TestOnlyAProvenReportCounts(t *testing.T) {
	if err := proven(CleanupReport{Keyspaces: []string{"a", "b"}, Cleaned: []string{"a"}, Dropped: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	err := proven(CleanupReport{Keyspaces: []string{"a", "b"}, Cleaned: []string{"a"}})
	if !errors.Is(err, ErrCleanupNotProven) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("proven = %v", err)
	}
}

type panickyCleaner struct{}

func (panickyCleaner) StopCleanups(context.Context) error { return nil }
func (panickyCleaner) CleanupKeyspaces(context.Context) ([]string, error) {
	return []string{"shop"}, nil
}
func (panickyCleaner) CleanupKeyspace(context.Context, string) error { panic("lost connection state") }

// TestCleanupDriverCountsRecordedRunningAsRunning: the state of a driver
// that stopped says n3 runs (and the node does go on cleaning); rack r1 is
// done. A new driver must re-run n3 before it starts n2 or n5, which
// share ranges with n3; had it forgotten n3, the scheduler would have
// started n2 and n5 beside it (checked: the harness then reports both).
func TestCleanupDriverCountsRecordedRunningAsRunning(t *testing.T) {
	topo := racked9()
	f := newFakeCluster(topo)
	c, _ := f.cleanerFor("n3")
	_ = c.StopCleanups(context.Background()) // the stopped driver's run, still going
	f.stops["n3"] = 0
	store := &MemCleanupStateStore{}
	_ = store.Save(context.Background(), CleanupState{Done: []string{"n1", "n4", "n7"}, Running: []string{"n3"}})
	d, err := NewCleanupDriver(CleanupDriverOptions{Scheduler: mustScheduler(t, topo, ScheduleLimits{}), CleanerFor: f.cleanerFor, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := d.Run(context.Background(), all9())
	if err != nil {
		t.Fatal(err)
	}
	f.check(t)
	if !slices.Equal(rep.Done, all9()) || rep.Attempts["n3"] != 1 || rep.Attempts["n1"] != 0 {
		t.Fatalf("report %+v", rep)
	}
}

// runDriver runs d over the nine nodes on fc and returns its result.
func runDriver(t *testing.T, d *CleanupDriver, fc *clocktesting.FakeClock) (CleanupRunReport, error) {
	t.Helper()
	type out struct {
		rep CleanupRunReport
		err error
	}
	ch := make(chan out, 1)
	go func() { rep, err := d.Run(context.Background(), all9()); ch <- out{rep, err} }()
	var res out
	waitFor(t, fc, time.Minute, func() bool {
		select {
		case res = <-ch:
			return true
		default:
			return false
		}
	})
	return res.rep, res.err
}

// TestCleanupDriverLostConnectionHoldsNeighbours: n4's connection drops
// mid-cleanup while ScyllaDB goes on cleaning, and the stop sent after
// the failure fails too. n4 must keep holding every node it shares a
// range with until a stop succeeds (its retry's own), so no replica of
// its ranges starts beside it. Counting a failed attempt as finished lets
// rack r2 start beside the still-cleaning n4.
func TestCleanupDriverLostConnectionHoldsNeighbours(t *testing.T) {
	topo := racked9()
	f := newFakeCluster(topo)
	f.lost["n4"] = 1
	f.stopFail["n4"] = 1 // the stop after the failure fails; the retry's succeeds
	fc := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	d, err := NewCleanupDriver(CleanupDriverOptions{
		Scheduler: mustScheduler(t, topo, ScheduleLimits{}), CleanerFor: f.cleanerFor, Store: &MemCleanupStateStore{},
		Clock: fc, Backoff: CleanupBackoff{Initial: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := runDriver(t, d, fc)
	if err != nil {
		t.Fatal(err)
	}
	f.check(t)
	if rep.Attempts["n4"] != 2 || !slices.Equal(rep.Done, all9()) {
		t.Fatalf("report %+v: want n4 retried once and every node done", rep)
	}
}

// TestCleanupDriverStoppedAfterLostConnection: the same lost connection,
// but the stop after it succeeds: n4 stops holding its neighbours at once
// (they need not wait out its backoff), and nothing overlaps.
func TestCleanupDriverStoppedAfterLostConnection(t *testing.T) {
	topo := racked9()
	f := newFakeCluster(topo)
	f.lost["n4"] = 1
	fc := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	d, err := NewCleanupDriver(CleanupDriverOptions{
		Scheduler: mustScheduler(t, topo, ScheduleLimits{}), CleanerFor: f.cleanerFor, Store: &MemCleanupStateStore{},
		Clock: fc, Backoff: CleanupBackoff{Initial: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := runDriver(t, d, fc)
	if err != nil {
		t.Fatal(err)
	}
	f.check(t)
	if rep.Attempts["n4"] != 2 || !slices.Equal(rep.Done, all9()) || f.stops["n4"] != 3 {
		t.Fatalf("report %+v, n4 stopped %d times: want 2 attempts, 3 stops, all done", rep, f.stops["n4"])
	}
}

// TestCleanupDriverGivesUpAnUnstoppableNode: n4 loses its connection on
// its only attempt and cannot be stopped. It is given up, stays recorded
// running (it may still be cleaning), and counts as running: the nodes
// the rules hold behind it (here every other rack, one rack at a time)
// are never started, and are reported failed with the reason. Its
// rack-mates, which share no range with it, are done.
func TestCleanupDriverGivesUpAnUnstoppableNode(t *testing.T) {
	topo := racked9()
	f := newFakeCluster(topo)
	f.lost["n4"] = 1
	f.stopFail["n4"] = 1000
	fc := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	store := &MemCleanupStateStore{}
	d, err := NewCleanupDriver(CleanupDriverOptions{
		Scheduler: mustScheduler(t, topo, ScheduleLimits{}), CleanerFor: f.cleanerFor, Store: store,
		Clock: fc, MaxAttempts: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := runDriver(t, d, fc)
	if err == nil {
		t.Fatal("a run that left nodes unstarted reported success")
	}
	f.check(t)
	if !slices.Equal(rep.Done, []string{"n1", "n7"}) {
		t.Fatalf("done %v, want only n4's rack-mates n1 and n7", rep.Done)
	}
	for _, ep := range []string{"n2", "n3", "n5", "n6", "n8", "n9"} {
		if !errors.Is(rep.Failed[ep], ErrCleanupNotProven) || !strings.Contains(rep.Failed[ep].Error(), "n4") {
			t.Errorf("%s: %v, want never started, held by n4", ep, rep.Failed[ep])
		}
		if rep.Attempts[ep] != 0 {
			t.Errorf("%s started %d times beside an unstoppable n4", ep, rep.Attempts[ep])
		}
	}
	st, _ := store.Load(context.Background())
	if !slices.Contains(st.Running, "n4") {
		t.Fatalf("state %+v: n4 may still be cleaning and must stay recorded running", st)
	}
}

// TestNewCleanupDriverNamesMissingOptions: a driver without its Scheduler,
// CleanerFor or Store is refused when it is built, and the error names
// every option missing, instead of a nil dereference in the middle of a
// campaign.
func TestNewCleanupDriverNamesMissingOptions(t *testing.T) {
	d, err := NewCleanupDriver(CleanupDriverOptions{MaxAttempts: 2})
	if d != nil || !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("NewCleanupDriver without parts = %v, %v; want ErrInvalidOptions", d, err)
	}
	for _, opt := range []string{"CleanupDriverOptions.Scheduler", "CleanupDriverOptions.CleanerFor", "CleanupDriverOptions.Store"} {
		if !strings.Contains(err.Error(), opt) {
			t.Errorf("error %q does not name %s", err, opt)
		}
	}
	s := mustScheduler(t, racked9(), ScheduleLimits{})
	if _, err := NewCleanupDriver(CleanupDriverOptions{Scheduler: s, CleanerFor: newFakeCluster(racked9()).cleanerFor}); !errors.Is(err, ErrInvalidOptions) ||
		!strings.Contains(err.Error(), "Store") || strings.Contains(err.Error(), "Scheduler") {
		t.Errorf("NewCleanupDriver without a Store: %v; want ErrInvalidOptions naming only the Store", err)
	}
}
