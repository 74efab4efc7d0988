package nodecache

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/orphan"
)

// Store is the crstore Store whose List reads an informer's cache of the
// node's Orphans (label longhornnode=<node>, the same selector crstore's
// List sends) instead of a LIST to the API server.
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
// Update and Delete go to the server.
//
// examples/controller-runtime's orphanctrl.Store makes the same bargain
// through controller-runtime's cached client; the two are not one type
// because each is built on its own host's client stack (client-go's
// dynamic client and informers here, controller-runtime's typed client
// and manager cache there), and share the mapping of records to Orphan
// objects through crstore instead.
//
// Until SetInformer is called and the informer has synced, List asks the
// server. The agent wraps it in hostkit.Pinned, so that the Sweeper plans
// from the very list whose volumes the agent read.
type Store struct {
	*crstore.Store

	mu  sync.Mutex
	inf cache.SharedIndexInformer
}

// NewStore returns s with its List served from an informer's cache once
// SetInformer is called.
func NewStore(s *crstore.Store) *Store {
	return &Store{Store: s}
}

// SetInformer sets the informer of the node's Orphans that List reads.
func (s *Store) SetInformer(inf cache.SharedIndexInformer) {
	s.mu.Lock()
	s.inf = inf
	s.mu.Unlock()
}

// List implements orphan.Store.
func (s *Store) List(ctx context.Context, sel orphan.Selector) ([]orphan.Record, error) {
	s.mu.Lock()
	inf := s.inf
	s.mu.Unlock()
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
