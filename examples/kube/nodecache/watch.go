package nodecache

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// localWatch lists and watches the objects of a resource that sel
// selects (sel sets the label or field selector of both the list and the
// watch; nil selects every object) and hands each change to apply, which
// keeps what its node needs in a store of its own. known is that store's
// keys: on a re-list, the objects it holds that the list no longer has
// come back as deletions.
//
// The list is read in pages (ListPages), and of each page only the
// objects keep accepts are kept, stripped by transform: the agent never
// holds a whole list at once, and its queue never holds more than its
// node's share (an object left out of a list is one the store would drop
// anyway, and one it held and the list lacks is a deletion). Watch events
// go through client-go's informer transform (the DeltaFIFO's Transformer,
// the hook SetTransform installs in a shared informer) and then to apply,
// which drops what is not the node's. The returned controller's HasSynced
// is true once the first list has been applied; the caller runs it.
func localWatch(ri dynamic.ResourceInterface, sel func(*metav1.ListOptions), known cache.KeyListerGetter,
	keep func(*unstructured.Unstructured) bool, transform cache.TransformFunc, apply func(d cache.Delta)) cache.Controller {
	if sel == nil {
		sel = func(*metav1.ListOptions) {}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			sel(&o)
			return listKept(ctx, ri, o, keep, transform)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			sel(&o)
			return ri.Watch(ctx, o)
		},
	}
	fifo := cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{
		KnownObjects:          known,
		EmitDeltaTypeReplaced: true,
		Transformer:           transform,
	})
	return cache.New(&cache.Config{
		Queue:         fifo,
		ListerWatcher: lw,
		ObjectType:    &unstructured.Unstructured{},
		Process: func(obj any, _ bool) error {
			deltas, ok := obj.(cache.Deltas)
			if !ok {
				return fmt.Errorf("nodecache: watch queue gave %T, not Deltas", obj)
			}
			for _, d := range deltas {
				apply(d)
			}
			return nil
		},
	})
}

// listKept lists in pages (ListPages) and returns the objects keep
// accepts, stripped by transform, as one list. Its resource version, from
// which the watch goes on, is the first page's, at which every page of a
// paged list is read; when an expired continue token had to be resumed,
// it is the last page's instead, since the first one's is compacted (a
// watch from it would fail and list again from the start). The events
// between the two versions among the keys read before the resumption are
// then missed until the next re-list: a replica created or changed there
// can be missing from the node's view, which is why nothing is recorded
// or purged on this view alone (Confirmer).
func listKept(ctx context.Context, ri dynamic.ResourceInterface, o metav1.ListOptions,
	keep func(*unstructured.Unstructured) bool, transform cache.TransformFunc) (*unstructured.UnstructuredList, error) {
	out := &unstructured.UnstructuredList{}
	last := ""
	res, err := ListPages(ctx, ri, o, func(list *unstructured.UnstructuredList) error {
		if out.GetKind() == "" {
			out.SetAPIVersion(list.GetAPIVersion())
			out.SetKind(list.GetKind())
		}
		last = list.GetResourceVersion()
		for i := range list.Items {
			if !keep(&list.Items[i]) {
				continue
			}
			obj, err := transform(&list.Items[i])
			if err != nil {
				return err
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				out.Items = append(out.Items, *u)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rv := res.ResourceVersion
	if !res.Consistent() {
		rv = last
	}
	out.SetResourceVersion(rv)
	return out, nil
}

// deltaKey is the namespace/name key of a delta's object, also of a
// deletion tombstone.
func deltaKey(d cache.Delta) (string, error) {
	return cache.DeletionHandlingMetaNamespaceKeyFunc(d.Object)
}
