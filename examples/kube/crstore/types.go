// Package crstore keeps caretaker's orphan records as Longhorn's Orphan
// custom resources (longhorn.io/v1beta2, namespaced) on a Kubernetes API
// server, through the dynamic client: the objects it writes are the ones
// Longhorn itself would write, with the same names, labels, parameters,
// finalizer and status conditions.
//
// Deletion follows Kubernetes: a record's deletion request is a set
// deletion timestamp, which the object's finalizer holds back until the
// node's agent has purged the data (or decided not to) and calls
// Store.Delete, which removes the finalizer.
package crstore

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The Orphan resource.
const (
	Group    = "longhorn.io"
	Version  = "v1beta2"
	Kind     = "Orphan"
	Resource = "orphans"

	// Finalizer is the finalizer Longhorn puts on its objects (its API
	// group). It holds a deleted Orphan until its data is dealt with.
	Finalizer = "longhorn.io"

	// DefaultNamespace is where Longhorn keeps its objects.
	DefaultNamespace = "longhorn-system"
)

// GVR is the Orphan resource's group, version and resource.
var GVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// OrphanSpec is an Orphan's spec, as Longhorn's CRD defines it.
type OrphanSpec struct {
	NodeID     string            `json:"nodeID"`
	OrphanType string            `json:"orphanType"`
	DataEngine string            `json:"dataEngine,omitempty"`
	Parameters map[string]string `json:"parameters"`
}

// OrphanStatus is an Orphan's status.
type OrphanStatus struct {
	OwnerID    string      `json:"ownerID"`
	Conditions []Condition `json:"conditions"`
}

// Condition is Longhorn's condition type: unlike metav1.Condition its
// times are strings (RFC 3339) and it has a probe time.
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastProbeTime      string `json:"lastProbeTime"`
	LastTransitionTime string `json:"lastTransitionTime"`
	Reason             string `json:"reason"`
	Message            string `json:"message"`
}
