package orphanctrl

import (
	"context"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// echoes remembers the controller's own writes to Orphans, so that their
// echo through the manager's cache (the watch event of an object the
// Store just created, updated or deleted) does not wake the node again:
// each such sweep would find nothing to do. A write is known by the
// resourceVersion the API server answered it with, a deletion by the
// object's name. An event that arrives before its write has returned is
// not recognised; it costs one sweep that finds nothing to do.
type echoes struct {
	mu      sync.Mutex
	written map[string]string // name → resourceVersion of our last write
	deleted map[string]bool   // names we asked the API server to delete
}

func newEchoes() *echoes {
	return &echoes{written: map[string]string{}, deleted: map[string]bool{}}
}

func (e *echoes) wrote(o client.Object) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.written[o.GetName()] = o.GetResourceVersion()
}

// created notes a new object: a deletion of an older one of that name is
// over.
func (e *echoes) created(o client.Object) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.deleted, o.GetName())
	e.written[o.GetName()] = o.GetResourceVersion()
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

// ours reports whether o, as a watch event shows it, is the result of
// the controller's last write of that object.
func (e *echoes) ours(o client.Object) bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	rv, ok := e.written[o.GetName()]
	return ok && rv == o.GetResourceVersion()
}

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
	err := c.Client.Create(ctx, o, opts...)
	if err == nil {
		c.e.created(o)
	}
	return err
}

func (c echoClient) Update(ctx context.Context, o client.Object, opts ...client.UpdateOption) error {
	err := c.Client.Update(ctx, o, opts...)
	if err == nil {
		c.e.wrote(o)
	}
	return err
}

func (c echoClient) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.PatchOption) error {
	err := c.Client.Patch(ctx, o, p, opts...)
	if err == nil {
		c.e.wrote(o)
	}
	return err
}

// Delete marks the name before the call: the DELETED event may come
// before the answer.
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
	err := s.SubResourceWriter.Update(ctx, o, opts...)
	if err == nil {
		s.e.wrote(o)
	}
	return err
}

func (s echoStatus) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	err := s.SubResourceWriter.Patch(ctx, o, p, opts...)
	if err == nil {
		s.e.wrote(o)
	}
	return err
}
