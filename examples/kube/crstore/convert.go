package crstore

import (
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/caretaker-storage/caretaker/orphan"
)

// The conversions every Store on Orphan objects needs, whatever client it
// uses: this package's (dynamic) and examples/controller-runtime's
// (controller-runtime's client) share them, so that both read
// DataCleanable, and so a record's cleanability, the same way.

// WrapAPIError maps an API error of op on the Orphan name to the orphan
// package's sentinels (NotFound → orphan.ErrNotFound, AlreadyExists →
// orphan.ErrAlreadyExists, Conflict → orphan.ErrConflict), keeping the API
// error in the chain. prefix names the Store in the message.
func WrapAPIError(prefix, op, name string, err error) error {
	var sentinel error
	switch {
	case apierrors.IsNotFound(err):
		sentinel = orphan.ErrNotFound
	case apierrors.IsAlreadyExists(err):
		sentinel = orphan.ErrAlreadyExists
	case apierrors.IsConflict(err):
		sentinel = orphan.ErrConflict
	default:
		return fmt.Errorf("%s: %s %s: %w", prefix, op, name, err)
	}
	return fmt.Errorf("%s: %s %s: %w: %w", prefix, op, name, sentinel, err)
}

// LonghornConditions converts conditions to Longhorn's type, keeping the
// probe times old has for conditions of the same type. A zero
// LastTransitionTime stays empty.
func LonghornConditions(old []Condition, cs []metav1.Condition) []Condition {
	probe := make(map[string]string, len(old))
	for _, c := range old {
		probe[c.Type] = c.LastProbeTime
	}
	out := make([]Condition, 0, len(cs))
	for _, c := range cs {
		lc := Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message, LastProbeTime: probe[c.Type]}
		if !c.LastTransitionTime.IsZero() {
			lc.LastTransitionTime = c.LastTransitionTime.UTC().Format(time.RFC3339)
		}
		out = append(out, lc)
	}
	return out
}

// MetaConditions converts Longhorn's conditions to metav1.Conditions, as
// orphan.Record carries them. A LastTransitionTime that is not RFC 3339
// is left zero.
func MetaConditions(cs []Condition) []metav1.Condition {
	if len(cs) == 0 {
		return nil
	}
	out := make([]metav1.Condition, 0, len(cs))
	for _, c := range cs {
		mc := metav1.Condition{Type: c.Type, Status: metav1.ConditionStatus(c.Status), Reason: c.Reason, Message: c.Message}
		if t, err := time.Parse(time.RFC3339, c.LastTransitionTime); err == nil {
			mc.LastTransitionTime = metav1.NewTime(t)
		}
		out = append(out, mc)
	}
	return out
}

// StripOrphan is a client-go informer transform (cache.TransformFunc, for
// SharedIndexInformer.SetTransform) that keeps of an Orphan only what
// RecordOf and LastCopyOverridden read: apiVersion, kind, name, namespace,
// uid, resourceVersion, labels, finalizers, creation and deletion
// timestamps, spec and status.conditions. It drops managedFields and
// annotations (kubectl's last-applied configuration is a second copy of
// the object). Anything that is not an *unstructured.Unstructured (a
// cache.DeletedFinalStateUnknown tombstone) is passed through unchanged.
func StripOrphan(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	meta := map[string]any{}
	src, _ := u.Object["metadata"].(map[string]any)
	for _, k := range []string{"name", "namespace", "uid", "resourceVersion", "labels", "finalizers", "creationTimestamp", "deletionTimestamp"} {
		if v, ok := src[k]; ok {
			meta[k] = v
		}
	}
	out := map[string]any{"apiVersion": u.Object["apiVersion"], "kind": u.Object["kind"], "metadata": meta}
	if spec, ok := u.Object["spec"]; ok {
		out["spec"] = spec
	}
	if conds, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions"); ok {
		out["status"] = map[string]any{"conditions": conds}
	}
	return &unstructured.Unstructured{Object: out}, nil
}
