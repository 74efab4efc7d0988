package orphanctrl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/orphan"
)

// maxDetachedLists bounds the detached volumes whose Replicas a sweep
// lists with one list each; past that, detachedPerList of them share a
// list.
const maxDetachedLists = 16

// detachedPerList is how many detached volumes' Replicas one list reads
// when a sweep has more than maxDetachedLists of them: the selector
// names each volume, up to 63 bytes a label value, so a list's URL stays
// under 8 KiB.
const detachedPerList = 100

// replicaPage is how many Replicas one page of a detached volumes' list
// carries.
const replicaPage = 500

// countDetached states each of the wanted detached volumes vols from its
// Replicas, listed now from the API server: with one list each, by the
// label longhornvolume=<volume>, up to maxDetachedLists of them; past
// that, with one list per detachedPerList volumes, by the set-based
// selector longhornvolume in (<volumes>). A volume is in the result only
// if its list succeeded, every page read at the first page's resource
// version; a failed list, or a page at another version, leaves its
// volumes out (unknown to the caller, never counted from a partial
// list). A volume whose name is no label value is left out too, as its
// own list would fail.
func (c *Controller) countDetached(ctx context.Context, vols []*unstructured.Unstructured) map[string]orphan.VolumeState {
	out := make(map[string]orphan.VolumeState, len(vols))
	if len(vols) == 0 {
		return out
	}
	vols = slices.Clone(vols)
	slices.SortFunc(vols, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	per := 1
	if len(vols) > maxDetachedLists {
		per = detachedPerList
	}
	for chunk := range slices.Chunk(vols, per) {
		var names []string
		for _, u := range chunk {
			if len(validation.IsValidLabelValue(u.GetName())) == 0 {
				names = append(names, u.GetName())
			} else {
				c.log.Warn("a detached volume's name is no label value: the volume is unknown to the last-copy guard", "volume", u.GetName())
			}
		}
		if len(names) == 0 {
			continue
		}
		items, err := c.listReplicasOf(ctx, names)
		if err != nil {
			c.log.Warn("replicas of detached volumes not listed: the volumes are unknown to the last-copy guard", "volumes", names, "err", err)
			continue
		}
		for _, u := range chunk {
			if slices.Contains(names, u.GetName()) {
				// VolumeStateOf keeps only the replicas labelled with u.
				out[u.GetName()] = longhorn.VolumeStateOf(u, items)
			}
		}
	}
	return out
}

// listReplicasOf lists, from the API server, the Replicas labelled with
// one of the volumes names, in pages of replicaPage, every page at the
// first page's resource version. A page that cannot be read so (its
// continue token expired) fails the list: it is never resumed at a later
// version, which would miss the replicas created among the keys read.
func (c *Controller) listReplicasOf(ctx context.Context, names []string) ([]unstructured.Unstructured, error) {
	op := selection.In
	if len(names) == 1 {
		op = selection.Equals
	}
	req, err := labels.NewRequirement(longhorn.LabelVolume, op, names)
	if err != nil {
		return nil, err
	}
	sel := labels.NewSelector().Add(*req)
	var items []unstructured.Unstructured
	var rv, cont string
	for page := 0; ; page++ {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(ReplicaGVK.GroupVersion().WithKind(ReplicaGVK.Kind + "List"))
		opts := []client.ListOption{client.InNamespace(c.cfg.Namespace), client.MatchingLabelsSelector{Selector: sel}, client.Limit(replicaPage)}
		if cont != "" {
			opts = append(opts, client.Continue(cont))
		}
		if err := c.api.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		if page == 0 {
			rv = list.GetResourceVersion()
		} else if list.GetResourceVersion() != rv {
			return nil, fmt.Errorf("orphanctrl: replica list page %d at resource version %s, the first at %s", page, list.GetResourceVersion(), rv)
		}
		items = append(items, list.Items...)
		if cont = list.GetContinue(); cont == "" {
			return items, nil
		}
	}
}
