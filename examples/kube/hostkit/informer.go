package hostkit

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// OnWrite is the shape of crstore's Options.OnWrite, for a host whose
// record store calls it after each write: u is the object as the API
// server answered the write, nil for a deletion. It tells e of the write,
// so that its echo wakes nothing.
func (e *Echoes) OnWrite(name string, u *unstructured.Unstructured) {
	if u == nil {
		e.Deleting(name, true)
		return
	}
	e.Wrote(name, u.GetResourceVersion())
}

// Handler returns informer event handlers for the host's records that call
// wake for every event but the host's own writes coming back (Echo) and
// the deletions it made (Gone). An object of an unexpected type wakes the
// host: an event never goes unjudged.
func (e *Echoes) Handler(wake func()) cache.ResourceEventHandlerFuncs {
	event := func(obj any, deleted bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		u, ok := obj.(*unstructured.Unstructured)
		switch {
		case !ok:
			wake()
		case deleted && !e.Gone(u.GetName()), !deleted && !e.Echo(u.GetName(), u.GetResourceVersion()):
			wake()
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { event(obj, false) },
		UpdateFunc: func(_, obj any) { event(obj, false) },
		DeleteFunc: func(obj any) { event(obj, true) },
	}
}
