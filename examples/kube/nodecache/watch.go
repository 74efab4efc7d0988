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

// listPage is how many objects one LIST page of a wide watch carries:
// the most a cache decodes at once.
const listPage = 500

// localWatch lists and watches every object of a resource (no selector:
// see the package doc for why) and hands each change to apply, which
// keeps what its node needs in a store of its own. known is that store's
// keys: on a re-list, the objects it holds that the list no longer has
// come back as deletions.
//
// The list is read in pages of listPage objects, and of each page only
// the objects keep accepts are kept, stripped by transform: the agent
// never holds the cluster's list at once, and its queue never holds more
// than its node's share (an object left out of a list is one the store
// would drop anyway, and one it held and the list lacks is a deletion).
// Watch events go through client-go's informer transform (the DeltaFIFO's
// Transformer, the hook SetTransform installs in a shared informer) and
// then to apply, which drops what is not the node's. The returned
// controller's HasSynced is true once the first list has been applied;
// the caller runs it.
func localWatch(ri dynamic.ResourceInterface, known cache.KeyListerGetter,
	keep func(*unstructured.Unstructured) bool, transform cache.TransformFunc, apply func(d cache.Delta)) cache.Controller {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return listKept(ctx, ri, o, keep, transform)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
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

// listKept lists in pages and returns the objects keep accepts, stripped
// by transform, as one list at the first page's resource version (every
// page of a paginated list is read at that version).
func listKept(ctx context.Context, ri dynamic.ResourceInterface, o metav1.ListOptions,
	keep func(*unstructured.Unstructured) bool, transform cache.TransformFunc) (*unstructured.UnstructuredList, error) {
	if o.ResourceVersion == "0" {
		// "Any version" is served from the API server's cache whole, with
		// no pages: ask for the latest, which pages.
		o.ResourceVersion, o.ResourceVersionMatch = "", ""
	}
	o.Limit = listPage
	out := &unstructured.UnstructuredList{}
	for page := 0; ; page++ {
		list, err := ri.List(ctx, o)
		if err != nil {
			return nil, err
		}
		if page == 0 {
			out.SetAPIVersion(list.GetAPIVersion())
			out.SetKind(list.GetKind())
			out.SetResourceVersion(list.GetResourceVersion())
		}
		for i := range list.Items {
			if !keep(&list.Items[i]) {
				continue
			}
			obj, err := transform(&list.Items[i])
			if err != nil {
				return nil, err
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				out.Items = append(out.Items, *u)
			}
		}
		if list.GetContinue() == "" {
			return out, nil
		}
		o.Continue = list.GetContinue()
		o.ResourceVersion, o.ResourceVersionMatch = "", ""
	}
}

// deltaKey is the namespace/name key of a delta's object, also of a
// deletion tombstone.
func deltaKey(d cache.Delta) (string, error) {
	return cache.DeletionHandlingMetaNamespaceKeyFunc(d.Object)
}
