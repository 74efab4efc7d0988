package orphanctrl_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/caretaker-storage/caretaker/examples/controller-runtime/orphanctrl"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// volumeRequests counts a manager's requests for Volumes by verb.
type volumeRequests struct {
	list, watch, get atomic.Int64
	next             http.RoundTripper
}

func (c *volumeRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/volumes") {
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			c.watch.Add(1)
		case strings.HasSuffix(r.URL.Path, "/volumes"):
			c.list.Add(1)
		default:
			c.get.Add(1)
		}
	}
	return c.next.RoundTrip(r)
}

// TestVolumesWantedOneAfterAnotherDoNotStallTheCache: ten faulted volumes
// whose copies on the node turn up one a second each become wanted by
// the sweep in turn. The Volume cache must not stay unready (every
// volume unknown to the last-copy guard) for long each time: ending the
// watch on each growth made client-go's reflector relist after its
// backoff (0.8 s doubling to 30 s), tens of seconds in all. It reports
// the time the cache was not ready and the Volume requests the manager
// made, and checks that no copy was purged.
func TestVolumesWantedOneAfterAnotherDoNotStallTheCache(t *testing.T) {
	const n = 10
	e := newEnv(t)
	counter := &volumeRequests{}
	cfg := rest.CopyConfig(restCfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)

	logger, _ := kubetest.HostLog(t, "controller node-1")
	mgr, lc, err := newManager(cfg, e.ns, "node-1", manager.Options{Logger: logr.FromSlogHandler(logger.Handler())})
	if err != nil {
		t.Fatal(err)
	}
	ccfg := orphanctrl.Config{NodeID: "node-1", Namespace: e.ns, Period: scanPeriod, LocalCache: lc, Logger: logger,
		Policy: orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}}
	if _, err := orphanctrl.Setup(mgr, ccfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	ready := func() bool {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(orphanctrl.VolumeGVK.GroupVersion().WithKind("VolumeList"))
		if err := mgr.GetCache().List(ctx, list, client.InNamespace(e.ns)); err != nil {
			return false
		}
		return orphanctrl.VolumesReady(lc, list.Items)
	}
	e.waitFor("the volume cache to be ready", func() error {
		if !ready() {
			return fmt.Errorf("not ready")
		}
		return nil
	})

	// Sample readiness every 10 ms from the first volume on.
	var (
		mu       sync.Mutex
		notReady time.Duration
		longest  time.Duration
	)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		const tick = 10 * time.Millisecond
		var run time.Duration
		for {
			select {
			case <-stop:
				return
			case <-time.After(tick):
			}
			r := ready()
			mu.Lock()
			if r {
				run = 0
			} else {
				notReady += tick
				run += tick
				longest = max(longest, run)
			}
			mu.Unlock()
		}
	}()
	lists0, watches0, gets0 := counter.list.Load(), counter.watch.Load(), counter.get.Load()
	start := time.Now()
	dirs := make([]string, n)
	for i := range n {
		vol := fmt.Sprintf("pvc-seq%d", i)
		dirs[i] = fmt.Sprintf("%s-aaaaaaa%d", vol, i)
		e.lh.SetVolume(vol, "faulted")
		e.lh.RecoverableDir(d, dirs[i], 3)
		time.Sleep(time.Second)
	}
	// Every copy's orphan guarded as the last copy of a faulted volume,
	// and the cache ready again.
	e.waitFor("every copy's orphan to be guarded, the cache ready", func() error {
		orphans := e.nodeOrphans("node-1")
		for i, dir := range dirs {
			if !exists(t, d.Dir(dir)) {
				t.Fatalf("the last copy %s of a faulted volume was purged", dir)
			}
			o, ok := orphans[longhornName(d, dir)]
			if !ok {
				return fmt.Errorf("%s: no Orphan", dir)
			}
			if s, r, _ := conditionOf(o, "PurgeGuarded"); s != "True" || r != "LastCopy" {
				return fmt.Errorf("pvc-seq%d: PurgeGuarded = %s %s", i, s, r)
			}
		}
		if !ready() {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	elapsed := time.Since(start)
	close(stop)
	<-sampled
	mu.Lock()
	defer mu.Unlock()
	lists, watches, gets := counter.list.Load()-lists0, counter.watch.Load()-watches0, counter.get.Load()-gets0
	t.Logf("%d volumes wanted one a second: %v until all guarded; the Volume cache not ready %v in all (longest %v); Volume requests: %d LIST, %d WATCH, %d GET",
		n, elapsed.Round(10*time.Millisecond), notReady, longest, lists, watches, gets)
	// Each growth takes one read of the newly wanted volume: well under a
	// second each, whatever the reflector's backoff (ending the watch
	// each time left the cache not ready 7.7 to 17 s in all here, the
	// longest stall 4.6 to 10 s).
	if notReady > 3*time.Second {
		t.Errorf("the Volume cache was not ready %v in all over %d growths; want under 3 s", notReady, n)
	}
	if lists > 3*n {
		t.Errorf("%d Volume LISTs for %d growths", lists, n)
	}
	if watches != 0 {
		t.Errorf("the Volume watch was started %d times: a growth ended it", watches)
	}
}

// TestManyVolumesWantedAtOnceAreReadWithOneList: forty faulted volumes
// whose copies are on the node when the controller starts become wanted
// by its first sweep all at once. The node-local Volume cache reads them
// with one paged list of the namespace, not a LIST by name each, and
// every copy is guarded as the last copy of a faulted volume, none
// purged. It reports the Volume requests the manager made.
func TestManyVolumesWantedAtOnceAreReadWithOneList(t *testing.T) {
	const n = 40
	e := newEnv(t)
	counter := &volumeRequests{}
	cfg := rest.CopyConfig(restCfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	e.cfg = cfg
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	dirs := make([]string, n)
	for i := range n {
		vol := fmt.Sprintf("pvc-many%02d", i)
		dirs[i] = fmt.Sprintf("%s-%08x", vol, 0xbee00+i)
		e.lh.SetVolume(vol, "faulted")
		e.lh.RecoverableDir(d, dirs[i], 3)
	}
	e.start("node-1", manager.Options{}, func(_ manager.Manager, c *orphanctrl.Config) {
		c.Policy = orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}
	})
	e.waitFor("every copy's orphan to be guarded as a last copy", func() error {
		orphans := e.nodeOrphans("node-1")
		for _, dir := range dirs {
			if !exists(t, d.Dir(dir)) {
				t.Fatalf("the last copy %s of a faulted volume was purged", dir)
			}
			o, ok := orphans[longhornName(d, dir)]
			if !ok {
				return fmt.Errorf("%s: no Orphan", dir)
			}
			if s, r, _ := conditionOf(o, "PurgeGuarded"); s != "True" || r != "LastCopy" {
				return fmt.Errorf("%s: PurgeGuarded = %s %s", dir, s, r)
			}
		}
		return nil
	})
	lists, watches, gets := counter.list.Load(), counter.watch.Load(), counter.get.Load()
	t.Logf("%d volumes wanted at once: Volume requests: %d LIST, %d WATCH, %d GET", n, lists, watches, gets)
	// The informer's first LIST (which wants none), and one list of the
	// forty: a LIST by name each would be 41.
	if lists > 3 {
		t.Errorf("%d Volume LISTs for %d volumes wanted at once; want the informer's and one more", lists, n)
	}
}
