package orphanctrl

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/caretaker-storage/caretaker/examples/kube/hostkit"
)

// echoClient is a client.Client that brackets every write it makes with
// hostkit.Echoes' Begin and End, so the write's echo through the
// manager's cache, even one that beats the write's answer, does not wake
// the node again.
type echoClient struct {
	client.Client
	e *hostkit.Echoes
}

func (c echoClient) Create(ctx context.Context, o client.Object, opts ...client.CreateOption) error {
	// A new object: a deletion of an older one of that name is over.
	c.e.Deleting(o.GetName(), false)
	c.e.Begin(o.GetName())
	err := c.Client.Create(ctx, o, opts...)
	c.e.End(o.GetName(), o.GetResourceVersion(), err)
	return err
}

func (c echoClient) Update(ctx context.Context, o client.Object, opts ...client.UpdateOption) error {
	c.e.Begin(o.GetName())
	err := c.Client.Update(ctx, o, opts...)
	c.e.End(o.GetName(), o.GetResourceVersion(), err)
	return err
}

func (c echoClient) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.PatchOption) error {
	c.e.Begin(o.GetName())
	err := c.Client.Patch(ctx, o, p, opts...)
	c.e.End(o.GetName(), o.GetResourceVersion(), err)
	return err
}

// Delete marks the name before the call: the DELETED event, or the
// update that sets the deletion timestamp, may come before the answer.
func (c echoClient) Delete(ctx context.Context, o client.Object, opts ...client.DeleteOption) error {
	c.e.Deleting(o.GetName(), true)
	err := c.Client.Delete(ctx, o, opts...)
	if err != nil {
		c.e.Deleting(o.GetName(), false)
	}
	return err
}

func (c echoClient) Status() client.SubResourceWriter {
	return echoStatus{c.Client.Status(), c.e}
}

// echoStatus is the status writer of an echoClient.
type echoStatus struct {
	client.SubResourceWriter
	e *hostkit.Echoes
}

func (s echoStatus) Update(ctx context.Context, o client.Object, opts ...client.SubResourceUpdateOption) error {
	s.e.Begin(o.GetName())
	err := s.SubResourceWriter.Update(ctx, o, opts...)
	s.e.End(o.GetName(), o.GetResourceVersion(), err)
	return err
}

func (s echoStatus) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	s.e.Begin(o.GetName())
	err := s.SubResourceWriter.Patch(ctx, o, p, opts...)
	s.e.End(o.GetName(), o.GetResourceVersion(), err)
	return err
}
