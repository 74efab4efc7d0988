package agent

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/orphan"
)

// cachedStore is the crstore Store whose List reads the agent's own
// informer cache of the node's Orphans (label longhornnode=<node>, the
// same selector crstore's List sends) instead of a LIST to the API server.
//
// Why the Sweeper may trust a cache for List: orphan.Store's List promises
// the records that match, nothing about their age, and the Sweeper never
// acts on a listed record alone. A record missing from a stale list is
// planned as a create, and Create of an existing record is
// ErrAlreadyExists, which the Sweeper takes as done. A listed record that
// is gone or changed is re-read before every step that acts on it: a
// purge re-reads it with Get (gone, withdrawn, dismissed, not cleanable:
// refused) and re-judges its data, a condition is written on a fresh Get,
// a forget updates a fresh read. A deletion request not in the cache yet
// arrives as a watch event, which runs the next sweep. Only Get, Create,
// Update and Delete go to the server, as before.
//
// Until the informer has synced, List asks the server.
type cachedStore struct {
	*crstore.Store
	inf func() cache.SharedIndexInformer

	mu     sync.Mutex
	pinned []orphan.Record // what the next List returns, once (see pin)
	pinSel orphan.Selector
	isPin  bool
}

// pin lists the records of sel and makes the next List of sel return
// them (copies), so the agent knows exactly which records the Sweeper
// plans with (it looks up their volumes first).
func (s *cachedStore) pin(ctx context.Context, sel orphan.Selector) ([]orphan.Record, error) {
	recs, err := s.list(ctx, sel)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.pinned, s.pinSel, s.isPin = recs, sel, true
	s.mu.Unlock()
	return recs, nil
}

// List implements orphan.Store.
func (s *cachedStore) List(ctx context.Context, sel orphan.Selector) ([]orphan.Record, error) {
	s.mu.Lock()
	recs, ok := s.pinned, s.isPin && s.pinSel == sel
	s.pinned, s.isPin = nil, false
	s.mu.Unlock()
	if ok {
		out := make([]orphan.Record, len(recs))
		for i, r := range recs {
			out[i] = r.Clone()
		}
		return out, nil
	}
	return s.list(ctx, sel)
}

func (s *cachedStore) list(ctx context.Context, sel orphan.Selector) ([]orphan.Record, error) {
	inf := s.inf()
	if inf == nil || !inf.HasSynced() {
		return s.Store.List(ctx, sel)
	}
	objs := inf.GetStore().List()
	out := make([]orphan.Record, 0, len(objs))
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		r, err := crstore.RecordOf(u)
		if err != nil {
			return nil, err
		}
		if sel.Matches(r) {
			s.Store.CheckDismissal(r)
			out = append(out, r)
		}
	}
	return out, nil
}

// echoes tells the agent's own writes, coming back through its Orphan
// watch, from everyone else's changes: crstore reports each object it
// wrote (Options.OnWrite), and an event carrying exactly that object
// version, or the deletion of an object the agent deleted, is an echo.
// An echo changes nothing the Sweeper has not already seen, so it does
// not start a sweep. Every other event does.
type echoes struct {
	mu      sync.Mutex
	written map[string]map[string]bool // name → resourceVersions the agent wrote
	deleted map[string]bool            // names the agent deleted
}

func newEchoes() *echoes {
	return &echoes{written: map[string]map[string]bool{}, deleted: map[string]bool{}}
}

// wrote is crstore's Options.OnWrite.
func (e *echoes) wrote(name string, u *unstructured.Unstructured) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if u == nil {
		e.deleted[name] = true
		delete(e.written, name)
		return
	}
	if e.written[name] == nil {
		e.written[name] = map[string]bool{}
	}
	e.written[name][u.GetResourceVersion()] = true
}

// isEcho says whether an event on obj (deleted: a delete event) is the
// agent's own write coming back, and forgets that write.
func (e *echoes) isEcho(obj any, deleted bool) bool {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	name := u.GetName()
	e.mu.Lock()
	defer e.mu.Unlock()
	if deleted {
		delete(e.written, name)
		if e.deleted[name] {
			delete(e.deleted, name)
			return true
		}
		return false
	}
	rvs := e.written[name]
	if rvs[u.GetResourceVersion()] {
		delete(rvs, u.GetResourceVersion())
		if len(rvs) == 0 {
			delete(e.written, name)
		}
		return true
	}
	// Someone else's version: the writes before it will not come back.
	delete(e.written, name)
	delete(e.deleted, name)
	return false
}

// echoSettle bounds how long a sweep that follows a batch of creates waits
// for the batch to come back through the watch.
const echoSettle = 2 * time.Second

// settle waits until every write the agent made has come back through
// its watch, at most max or until ctx is done.
func (e *echoes) settle(ctx context.Context, max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		e.mu.Lock()
		pending := len(e.written) + len(e.deleted)
		e.mu.Unlock()
		if pending == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling the agent's own bookkeeping, bounded by max
	}
}
