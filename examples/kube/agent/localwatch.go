package agent

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

// localWatch lists and watches every object of a resource (no selector:
// see replicas.go for why), runs each through client-go's informer
// transform (the DeltaFIFO's Transformer, the hook SetTransform installs
// in a shared informer), and hands each change to apply, which keeps what
// its node needs in a store of its own. known is that store's keys: on a
// re-list, the objects it holds that the list no longer has come back as
// deletions. The returned controller's HasSynced is true once the first
// list has been applied whole.
func localWatch(ctx context.Context, ri dynamic.ResourceInterface, known cache.KeyListerGetter,
	transform cache.TransformFunc, apply func(d cache.Delta)) cache.Controller {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return ri.List(ctx, o)
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
	ctl := cache.New(&cache.Config{
		Queue:         fifo,
		ListerWatcher: lw,
		ObjectType:    &unstructured.Unstructured{},
		Process: func(obj any, _ bool) error {
			deltas, ok := obj.(cache.Deltas)
			if !ok {
				return fmt.Errorf("agent: watch queue gave %T, not Deltas", obj)
			}
			for _, d := range deltas {
				apply(d)
			}
			return nil
		},
	})
	go ctl.RunWithContext(ctx)
	return ctl
}

// deltaKey is the namespace/name key of a delta's object, also of a
// deletion tombstone.
func deltaKey(d cache.Delta) (string, error) {
	return cache.DeletionHandlingMetaNamespaceKeyFunc(d.Object)
}
