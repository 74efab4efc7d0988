package orphanctrl_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/caretaker-storage/caretaker/examples/controller-runtime/orphanctrl"
	"github.com/caretaker-storage/caretaker/orphan"
)

// replicaLists counts a manager's LISTs of Replicas by a label selector
// (the detached volumes' lists; the cache's Replica LIST has none), and
// how many volumes they named in all.
type replicaLists struct {
	mu           sync.Mutex
	lists, named int
	next         http.RoundTripper
}

func (c *replicaLists) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/replicas") && q.Get("watch") == "" && q.Get("labelSelector") != "" {
		sel := q.Get("labelSelector")
		c.mu.Lock()
		c.lists++
		if _, set, ok := strings.Cut(sel, " in ("); ok {
			c.named += strings.Count(set, ",") + 1
		} else {
			c.named++
		}
		c.mu.Unlock()
	}
	return c.next.RoundTrip(r)
}

func (c *replicaLists) take() (lists, named int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lists, named, c.lists, c.named = c.lists, c.named, 0, 0
	return lists, named
}

// sweepCounter counts the node's sweeps: the Sweeper lists the node's
// records once per sweep.
type sweepCounter struct {
	orphan.Store
	mu     sync.Mutex
	sweeps int
}

func (s *sweepCounter) List(ctx context.Context, sel orphan.Selector) ([]orphan.Record, error) {
	s.mu.Lock()
	s.sweeps++
	s.mu.Unlock()
	return s.Store.List(ctx, sel)
}

func (s *sweepCounter) take() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.sweeps
	s.sweeps = 0
	return n
}

// TestManyDetachedVolumesAreCountedInFewLists: 30 detached volumes
// (robustness unknown) each with a recoverable copy orphaned on the
// node, a third with a healthy other replica, a third with a failed one,
// a third with none. With auto-deletion on, the copies of the first
// third are not guarded as last copies (held only by the purge budget of
// a start) and the other twenty are, as each volume's own list would
// state them; and past 16 detached volumes a sweep lists their Replicas
// with one set-based selector per 100 volumes, not one list each:
// counted at the API client, Replica LISTs per sweep.
func TestManyDetachedVolumesAreCountedInFewLists(t *testing.T) {
	const n = 30
	e := newEnv(t)
	counter := &replicaLists{}
	cfg := rest.CopyConfig(restCfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	e.cfg = cfg
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	dirs := make([]string, n)
	for i := range n {
		vol := fmt.Sprintf("pvc-det%02d", i)
		dirs[i] = fmt.Sprintf("%s-%08x", vol, 0xabc00+i)
		switch i % 3 {
		case 0:
			e.lh.SetDetachedVolume(vol, 1)
			e.lh.VolumeReplica(vol, vol+"-r-1", true)
		case 1:
			e.lh.SetDetachedVolume(vol, 1)
			e.lh.VolumeReplica(vol, vol+"-r-1", false)
		case 2:
			e.lh.SetDetachedVolume(vol, 2)
		}
		e.lh.RecoverableDir(d, dirs[i], 3)
	}
	sc := &sweepCounter{}
	e.start("node-1", manager.Options{}, func(mgr manager.Manager, c *orphanctrl.Config) {
		c.Policy = orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}
		sc.Store = orphanctrl.NewStore(mgr.GetClient(), mgr.GetAPIReader(), c.Namespace, c.NodeID)
		c.Store = sc
	})
	e.waitFor("the healthy volumes' copies judged healthy, the others guarded as last copies", func() error {
		orphans := e.nodeOrphans("node-1")
		for i, dir := range dirs {
			there := exists(t, d.Dir(dir))
			if i%3 != 0 && !there {
				t.Fatalf("the last copy %s of a detached volume with no healthy replica was purged", dir)
			}
			o, ok := orphans[longhornName(d, dir)]
			if !ok {
				if !there {
					continue // purged: its volume was healthy
				}
				return fmt.Errorf("%s: no Orphan", dir)
			}
			s, r, _ := conditionOf(o, "PurgeGuarded")
			switch {
			case i%3 == 0 && (s != "True" || r == "LastCopy"):
				// Purged, or held by the purge budget of a start: not as
				// a last copy.
				return fmt.Errorf("%s (a healthy volume's): PurgeGuarded = %s %s", dir, s, r)
			case i%3 != 0 && (s != "True" || r != "LastCopy"):
				return fmt.Errorf("%s: PurgeGuarded = %s %s", dir, s, r)
			}
		}
		return nil
	})
	if !exists(t, d.Dir(ownedDir)) {
		t.Fatal("auto-deletion removed the directory a Replica expects")
	}

	// Steady: the thirty detached volumes wanted at every sweep. A label on
	// an Orphan, which changes nothing the sweep decides, wakes one.
	counter.take()
	sc.take()
	var sweeps, lists, named, wakes int
	e.waitFor("ten sweeps", func() error {
		wakes++
		e.annotate(longhornName(d, dirs[1]), fmt.Sprint(wakes))
		l, nm := counter.take()
		lists, named, sweeps = lists+l, named+nm, sweeps+sc.take()
		if sweeps < 10 {
			return fmt.Errorf("%d sweeps", sweeps)
		}
		return nil
	})
	l, nm := counter.take()
	lists, named = lists+l, named+nm
	t.Logf("%d detached volumes wanted: %d sweeps, %d Replica LISTs by label naming %d volumes (%.1f LISTs a sweep)",
		n, sweeps, lists, named, float64(lists)/float64(sweeps))
	if named < (sweeps-2)*n {
		t.Fatalf("%d volumes named over %d sweeps: the sweeps did not count the %d detached volumes", named, sweeps, n)
	}
	if lists > sweeps+1 {
		t.Errorf("%d Replica LISTs over %d sweeps of %d detached volumes; want one a sweep", lists, sweeps, n)
	}
}
