package hostkit_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/caretaker-storage/caretaker/examples/kube/hostkit"
)

// TestHandlerWakesForEverythingButOwnWrites: the informer handlers wake
// the host for others' changes, never for its own writes and deletions
// coming back, and for an object they cannot read.
func TestHandlerWakesForEverythingButOwnWrites(t *testing.T) {
	e := hostkit.NewEchoes(nil)
	woken := 0
	h := e.Handler(func() { woken++ })
	obj := func(name, rv string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetName(name)
		u.SetResourceVersion(rv)
		return u
	}
	e.OnWrite("a", obj("a", "10"))
	e.OnWrite("gone", nil)

	steps := []struct {
		what string
		do   func()
		wake bool
	}{
		{"own write", func() { h.AddFunc(obj("a", "10")) }, false},
		{"another version", func() { h.UpdateFunc(nil, obj("a", "11")) }, true},
		{"another object", func() { h.AddFunc(obj("b", "10")) }, true},
		{"own deletion, tombstone", func() {
			h.DeleteFunc(cache.DeletedFinalStateUnknown{Key: "ns/gone", Obj: obj("gone", "12")})
		}, false},
		{"someone else's deletion", func() { h.DeleteFunc(obj("b", "13")) }, true},
		{"an object of another type", func() { h.AddFunc("not an object") }, true},
	}
	for _, s := range steps {
		before := woken
		s.do()
		if got := woken > before; got != s.wake {
			t.Errorf("%s: woke %v, want %v", s.what, got, s.wake)
		}
	}
}
