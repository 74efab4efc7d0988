package orphanctrl

import (
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
)

// GroupVersion is Longhorn's API group and version of the Orphan resource.
var GroupVersion = schema.GroupVersion{Group: crstore.Group, Version: crstore.Version}

// Orphan is Longhorn's Orphan resource as a typed object, so that the
// manager's cache keeps it (the cached client does not cache unstructured
// objects by default). Its spec and status are examples/kube's types: one
// schema, crd/orphans.longhorn.io.yaml.
type Orphan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   crstore.OrphanSpec   `json:"spec,omitempty"`
	Status crstore.OrphanStatus `json:"status,omitempty"`
}

// OrphanList is a list of Orphans.
type OrphanList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Orphan `json:"items"`
}

// DeepCopyInto copies o into out.
func (o *Orphan) DeepCopyInto(out *Orphan) {
	*out = *o
	o.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Parameters = maps.Clone(o.Spec.Parameters)
	out.Status.Conditions = slices.Clone(o.Status.Conditions)
}

// DeepCopy returns a copy of o.
func (o *Orphan) DeepCopy() *Orphan {
	if o == nil {
		return nil
	}
	out := new(Orphan)
	o.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (o *Orphan) DeepCopyObject() runtime.Object { return o.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *OrphanList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &OrphanList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Orphan, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// AddToScheme registers Orphan and OrphanList.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Orphan{}, &OrphanList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// NewScheme returns client-go's scheme with the Orphan types added: what
// a manager hosting the controller needs.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Longhorn's Node, Replica and Volume kinds, which the controller reads
// from the manager's cache as unstructured objects (package longhorn of
// examples/kube reads their fields).
var (
	NodeGVK    = GroupVersion.WithKind("Node")
	ReplicaGVK = GroupVersion.WithKind("Replica")
	VolumeGVK  = GroupVersion.WithKind("Volume")
)

func newUnstructured(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}
