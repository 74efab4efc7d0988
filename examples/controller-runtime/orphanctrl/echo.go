package orphanctrl

import (
	"context"
	"slices"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// echoes remembers the controller's own writes to Orphans, so that their
// echo through the manager's cache (the watch event of an object the
// Store just created, updated or deleted) does not wake the node again:
// each such sweep would find nothing to do. A write is known by the
// resourceVersion the API server answered it with, a deletion by the
// object's name. The watch event often arrives before the write's answer:
// an event of an object with a write in flight is held until the write
// returns, and wakes the node then only if it was not the write's.
type echoes struct {
	wake func() // enqueues the node

	mu       sync.Mutex
	written  map[string][]string // name → resourceVersions of our last writes
	inFlight map[string]int      // name → writes not answered yet
	held     map[string][]string // name → resourceVersions of events held meanwhile
	deleted  map[string]bool     // names we asked the API server to delete
}

// keepWritten is how many of an object's last writes are remembered: a
// Store call makes at most three in a row.
const keepWritten = 4

func newEchoes(wake func()) *echoes {
	return &echoes{wake: wake, written: map[string][]string{}, inFlight: map[string]int{},
		held: map[string][]string{}, deleted: map[string]bool{}}
}

// begin notes a write of name about to be sent.
func (e *echoes) begin(name string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inFlight[name]++
}

// end notes the answer to a write begun: o as the API server returned it
// if err is nil. When no write of the name is left in flight, an event
// held meanwhile that was not ours wakes the node.
func (e *echoes) end(o client.Object, err error) {
	if e == nil {
		return
	}
	e.mu.Lock()
	name := o.GetName()
	if err == nil {
		w := append(e.written[name], o.GetResourceVersion())
		e.written[name] = w[max(0, len(w)-keepWritten):]
	}
	e.inFlight[name]--
	wake := false
	if e.inFlight[name] <= 0 {
		delete(e.inFlight, name)
		for _, rv := range e.held[name] {
			wake = wake || !slices.Contains(e.written[name], rv)
		}
		delete(e.held, name)
	}
	e.mu.Unlock()
	if wake {
		e.wake()
	}
}

// echo reports whether o, as a watch event shows it, need not wake the
// node now: it is the result of one of the controller's last writes of
// the object, or a write of it is in flight (the event is then held, see
// end).
func (e *echoes) echo(o client.Object) bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	name, rv := o.GetName(), o.GetResourceVersion()
	if slices.Contains(e.written[name], rv) {
		return true
	}
	if e.inFlight[name] > 0 {
		e.held[name] = append(e.held[name], rv)
		return true
	}
	return false
}

// deleting marks (on) or unmarks the object name as being deleted by the
// controller.
func (e *echoes) deleting(name string, on bool) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if on {
		e.deleted[name] = true
	} else {
		delete(e.deleted, name)
	}
}

// deletedByUs reports whether the controller is deleting the object
// name: its deletionTimestamp appearing is then our own echo.
func (e *echoes) deletedByUs(name string) bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.deleted[name]
}

// gone reports whether the deletion of the object name was the
// controller's own, and forgets the object.
func (e *echoes) gone(name string) bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ours := e.deleted[name]
	delete(e.deleted, name)
	delete(e.written, name)
	return ours
}

// echoClient is a client.Client that tells echoes of every write it makes.
type echoClient struct {
	client.Client
	e *echoes
}

func (c echoClient) Create(ctx context.Context, o client.Object, opts ...client.CreateOption) error {
	// A new object: a deletion of an older one of that name is over.
	c.e.deleting(o.GetName(), false)
	c.e.begin(o.GetName())
	err := c.Client.Create(ctx, o, opts...)
	c.e.end(o, err)
	return err
}

func (c echoClient) Update(ctx context.Context, o client.Object, opts ...client.UpdateOption) error {
	c.e.begin(o.GetName())
	err := c.Client.Update(ctx, o, opts...)
	c.e.end(o, err)
	return err
}

func (c echoClient) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.PatchOption) error {
	c.e.begin(o.GetName())
	err := c.Client.Patch(ctx, o, p, opts...)
	c.e.end(o, err)
	return err
}

// Delete marks the name before the call: the DELETED event, or the
// update that sets the deletion timestamp, may come before the answer.
func (c echoClient) Delete(ctx context.Context, o client.Object, opts ...client.DeleteOption) error {
	c.e.deleting(o.GetName(), true)
	err := c.Client.Delete(ctx, o, opts...)
	if err != nil {
		c.e.deleting(o.GetName(), false)
	}
	return err
}

func (c echoClient) Status() client.SubResourceWriter {
	return echoStatus{c.Client.Status(), c.e}
}

// echoStatus is the status writer of an echoClient.
type echoStatus struct {
	client.SubResourceWriter
	e *echoes
}

func (s echoStatus) Update(ctx context.Context, o client.Object, opts ...client.SubResourceUpdateOption) error {
	s.e.begin(o.GetName())
	err := s.SubResourceWriter.Update(ctx, o, opts...)
	s.e.end(o, err)
	return err
}

func (s echoStatus) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	s.e.begin(o.GetName())
	err := s.SubResourceWriter.Patch(ctx, o, p, opts...)
	s.e.end(o, err)
	return err
}
