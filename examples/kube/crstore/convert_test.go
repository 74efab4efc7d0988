package crstore

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/caretaker-storage/caretaker/orphan"
)

func TestConditionsConvertBothWays(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	cs := []metav1.Condition{
		{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionFalse, Reason: "DiskEvicted", Message: "m", LastTransitionTime: metav1.NewTime(at)},
		{Type: orphan.ConditionError, Status: metav1.ConditionFalse, Reason: "NoError"}, // no transition time yet
	}
	old := []Condition{{Type: orphan.ConditionDataCleanable, LastProbeTime: "2026-11-21T00:00:00Z"}}
	lc := LonghornConditions(old, cs)
	if len(lc) != 2 || lc[0].LastProbeTime != "2026-11-21T00:00:00Z" || lc[0].LastTransitionTime != "2026-11-22T10:00:00Z" ||
		lc[0].Status != "False" || lc[0].Reason != "DiskEvicted" || lc[1].LastTransitionTime != "" || lc[1].LastProbeTime != "" {
		t.Fatalf("LonghornConditions = %+v", lc)
	}
	back := MetaConditions(lc)
	if len(back) != 2 || !back[0].LastTransitionTime.Time.Equal(at) || back[0].Status != metav1.ConditionFalse ||
		back[0].Type != orphan.ConditionDataCleanable || !back[1].LastTransitionTime.IsZero() {
		t.Fatalf("MetaConditions = %+v", back)
	}
	r := orphan.Record{Conditions: back}
	if r.Cleanable() {
		t.Fatalf("a record read back with DataCleanable=False is cleanable")
	}
	if MetaConditions(nil) != nil {
		t.Fatalf("no conditions must read as nil")
	}
}

func TestWrapAPIErrorKeepsBothClasses(t *testing.T) {
	gr := schema.GroupResource{Group: Group, Resource: "orphans"}
	for _, tc := range []struct {
		err  error
		want error
	}{
		{apierrors.NewNotFound(gr, "x"), orphan.ErrNotFound},
		{apierrors.NewAlreadyExists(gr, "x"), orphan.ErrAlreadyExists},
		{apierrors.NewConflict(gr, "x", errors.New("changed")), orphan.ErrConflict},
	} {
		err := WrapAPIError("crstore", "get", "x", tc.err)
		if !errors.Is(err, tc.want) || !errors.Is(err, tc.err) {
			t.Errorf("WrapAPIError(%v) = %v: want both %v and the API error in the chain", tc.err, err, tc.want)
		}
	}
	other := errors.New("connection refused")
	if err := WrapAPIError("crstore", "get", "x", other); !errors.Is(err, other) || errors.Is(err, orphan.ErrNotFound) || errors.Is(err, orphan.ErrConflict) {
		t.Errorf("an unclassified error: %v", err)
	}
}
