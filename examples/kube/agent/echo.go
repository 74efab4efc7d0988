package agent

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

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
