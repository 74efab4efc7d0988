package crstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"

	"github.com/caretaker-storage/caretaker/orphan"
)

// maxAttempts bounds the read-modify-write retries of one call when the
// object keeps changing under it.
const maxAttempts = 10

// Options configure a Store.
type Options struct {
	// Namespace holds the Orphan objects; empty means DefaultNamespace.
	Namespace string
	// OwnerID, if set, is written to status.ownerID of the objects this
	// store creates: the node whose agent is in charge of them. It names
	// the node's ledger ConfigMap too (LedgerName).
	OwnerID string
	// FieldManager names this writer in the objects' managedFields, so
	// one can tell which agent changed what. Empty means the client's
	// user agent.
	FieldManager string
	// OnWrite, if set, is called after each write the Store makes, with
	// the object as the API server answered it (a create, an update, a
	// status update), or with the name and a nil object after a delete.
	// A host that watches the Orphans uses it to tell its own writes
	// coming back through its watch from other writers' changes (see
	// examples/kube/agent). It must not block.
	OnWrite func(name string, written *unstructured.Unstructured)
	// Logger, if set, is told once per Orphan about a dismissal label
	// whose value is an unknown spelling (read as a dismissal; see
	// Dismissed). Nil means silent.
	Logger *slog.Logger
}

// Store is an orphan.Store on Orphan custom resources. It is safe for
// concurrent use.
//
// The mapping:
//
//	Record.Name              metadata.name
//	Record.Labels            metadata.labels
//	Record.CreatedAt         metadata.creationTimestamp (set by the server)
//	Record.DeletionRequested metadata.deletionTimestamp is set
//	Record.ResourceVersion   metadata.resourceVersion
//	Record.NodeID, Kind,     spec.nodeID, spec.orphanType,
//	  DataEngine, Parameters   spec.dataEngine, spec.parameters
//	Record.Conditions        status.conditions (Longhorn's condition type)
//	Record.Dismissed         label caretaker.io/dismissed=true (orphan.LabelDismissed)
//
// A user dismisses an Orphan with
//
//	kubectl -n longhorn-system label orphan NAME caretaker.io/dismissed=true
//
// and returns it to normal by removing the label (caretaker.io/dismissed-):
// the label is the dismissal, so it lives exactly as long as the object.
//
// The label caretaker.io/last-copy-override=true (orphan.LabelLastCopyOverride)
// is a person's confirmation that the copy may be purged although its
// volume is faulted. It is no field of the record: the host reads it
// (LastCopyOverridden) into orphan.Cycle.LastCopyOverride, and it lets
// only a requested deletion (kubectl delete orphan) through. The Store
// never writes it.
// Update sets or removes it only when Record.Dismissed differs from it,
// in a metadata update of its own before the status is written.
//
// Objects are created with the Finalizer. Update with DeletionRequested
// issues a delete, which the finalizer turns into a deletion timestamp, so
// the request survives a crash; a deletion cannot be withdrawn, so
// DeletionRequested=false on an object being deleted is ignored. Delete
// removes the finalizer, then deletes the object: it never leaves behind a
// deletion request that was not there, so it can never cause a purge.
//
// API errors map to the orphan package's sentinels: NotFound to
// orphan.ErrNotFound, AlreadyExists to orphan.ErrAlreadyExists, Conflict
// to orphan.ErrConflict; the API error stays in the chain.
//
// It is an orphan.LedgerStore too: the guard's ledger of automatic purges
// is a ConfigMap per node (see LedgerName), so the purge budget survives
// the agent's restarts and is shared by every agent of the node.
type Store struct {
	ri        dynamic.ResourceInterface
	cm        dynamic.ResourceInterface // the namespace's ConfigMaps, for the ledger
	opts      Options
	spellings *DismissalLog
}

var _ orphan.Store = (*Store)(nil)

// New returns a Store on the Orphan objects of opts.Namespace.
func New(client dynamic.Interface, opts Options) *Store {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	return &Store{ri: client.Resource(GVR).Namespace(opts.Namespace), cm: client.Resource(ConfigMapGVR).Namespace(opts.Namespace), opts: opts, spellings: &DismissalLog{Logger: opts.Logger}}
}

// Namespace returns the namespace the store works in.
func (s *Store) Namespace() string { return s.opts.Namespace }

// List implements orphan.Store. The selector becomes a label selector on
// Longhorn's longhornnode and longhorn.io/orphan-type labels, and is
// checked again on the specs.
func (s *Store) List(ctx context.Context, sel orphan.Selector) ([]orphan.Record, error) {
	set := labels.Set{}
	if sel.NodeID != "" {
		set[orphan.LabelNode] = sel.NodeID
	}
	if sel.Kind != "" {
		set[orphan.LabelOrphanType] = string(sel.Kind)
	}
	opts := metav1.ListOptions{LabelSelector: set.String(), Limit: 500}
	var out []orphan.Record
	for {
		list, err := s.ri.List(ctx, opts)
		if err != nil {
			return nil, s.wrap("list", "", err)
		}
		for i := range list.Items {
			r, err := recordOf(&list.Items[i])
			if err != nil {
				return nil, err
			}
			if sel.Matches(r) {
				s.spellings.Check(r.Name, r.Labels)
				out = append(out, r)
			}
		}
		if list.GetContinue() == "" {
			return out, nil
		}
		opts.Continue = list.GetContinue()
	}
}

// Get implements orphan.Store.
func (s *Store) Get(ctx context.Context, name string) (orphan.Record, error) {
	u, err := s.ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return orphan.Record{}, s.wrap("get", name, err)
	}
	s.spellings.Check(name, u.GetLabels())
	return recordOf(u)
}

// Create implements orphan.Store. The object gets the record's labels, the
// Finalizer, and then, in a status update, the OwnerID and the record's
// conditions. A record created with DeletionRequested is deleted at once
// (its finalizer keeps it).
func (s *Store) Create(ctx context.Context, r orphan.Record) (orphan.Record, error) {
	if r.Name == "" {
		return orphan.Record{}, fmt.Errorf("crstore: create: %w: record has no name", orphan.ErrInvalidItem)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version,
		"kind":       Kind,
		"metadata": map[string]any{
			"name":      r.Name,
			"namespace": s.opts.Namespace,
		},
		"spec": specOf(r),
	}}
	u.SetLabels(WithDismissal(r.Labels, r.Dismissed))
	u.SetFinalizers([]string{Finalizer})
	created, err := s.ri.Create(ctx, u, metav1.CreateOptions{FieldManager: s.opts.FieldManager})
	if err != nil {
		return orphan.Record{}, s.wrap("create", r.Name, err)
	}
	s.wrote(r.Name, created)
	if s.opts.OwnerID != "" || len(r.Conditions) > 0 {
		setStatus(created, s.opts.OwnerID, r.Conditions)
		updated, err := s.ri.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: s.opts.FieldManager})
		switch {
		case err == nil:
			created = updated
			s.wrote(r.Name, created)
		case apierrors.IsConflict(err):
			// Someone changed it already; the status is theirs now.
		default:
			return orphan.Record{}, s.wrap("create (status)", r.Name, err)
		}
	}
	if r.DeletionRequested {
		return s.Update(ctx, r)
	}
	return recordOf(created)
}

// Update implements orphan.Store: it writes the record's conditions to
// the status and, if DeletionRequested, deletes the object (the finalizer
// keeps it, with a deletion timestamp). With a ResourceVersion, a stale
// one is ErrConflict; without, conflicts with other writers are retried.
func (s *Store) Update(ctx context.Context, r orphan.Record) (orphan.Record, error) {
	for range maxAttempts {
		cur, err := s.ri.Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil {
			return orphan.Record{}, s.wrap("update", r.Name, err)
		}
		if r.ResourceVersion != "" && r.ResourceVersion != cur.GetResourceVersion() {
			return orphan.Record{}, fmt.Errorf("crstore: update %s: %w: at resourceVersion %s, not %s",
				r.Name, orphan.ErrConflict, cur.GetResourceVersion(), r.ResourceVersion)
		}
		if r.Dismissed != dismissed(cur) {
			cur.SetLabels(WithDismissal(cur.GetLabels(), r.Dismissed))
			cur, err = s.ri.Update(ctx, cur, metav1.UpdateOptions{FieldManager: s.opts.FieldManager})
			if apierrors.IsConflict(err) && r.ResourceVersion == "" {
				continue
			}
			if err != nil {
				return orphan.Record{}, s.wrap("update (dismissal)", r.Name, err)
			}
			s.wrote(r.Name, cur)
		}
		want := conditionsOf(cur, r.Conditions)
		if !slices.Equal(want, readConditions(cur)) {
			setStatus(cur, "", r.Conditions)
			cur, err = s.ri.UpdateStatus(ctx, cur, metav1.UpdateOptions{FieldManager: s.opts.FieldManager})
			if apierrors.IsConflict(err) && r.ResourceVersion == "" {
				continue
			}
			if err != nil {
				return orphan.Record{}, s.wrap("update", r.Name, err)
			}
			s.wrote(r.Name, cur)
		}
		if r.DeletionRequested && cur.GetDeletionTimestamp() == nil {
			if err := s.requestDeletion(ctx, cur); err != nil {
				if apierrors.IsConflict(err) {
					continue
				}
				return orphan.Record{}, s.wrap("update (delete)", r.Name, err)
			}
			return s.Get(ctx, r.Name)
		}
		return recordOf(cur)
	}
	return orphan.Record{}, fmt.Errorf("crstore: update %s: %w: still changing after %d attempts", r.Name, orphan.ErrConflict, maxAttempts)
}

// dismissed reports whether the object carries the dismissal label.
func dismissed(u *unstructured.Unstructured) bool { return Dismissed(u.GetLabels()) }

// Dismissed reports whether labels dismiss the orphan: what
// Record.Dismissed is read from. Any value of orphan.LabelDismissed but a
// clear "no" (empty, 0, false, no, off in any case) dismisses, so a person
// who writes True, TRUE, 1 or yes gets the dismissal they meant; see
// orphan.ParseDismissal.
func Dismissed(labels map[string]string) bool {
	v, ok := labels[orphan.LabelDismissed]
	d, _ := orphan.ParseDismissal(v, ok)
	return d
}

// DismissalLog logs, once per Orphan and value, a dismissal label whose
// value is a spelling orphan.ParseDismissal does not know: it was read as
// a dismissal, and the person who wrote it should learn so. The zero value
// and a nil *DismissalLog are silent; it is safe for concurrent use.
type DismissalLog struct {
	Logger *slog.Logger

	mu   sync.Mutex
	seen map[string]string // Orphan name -> the unknown value last logged
}

// Check logs labels' dismissal value for the Orphan name if it is an
// unknown spelling not logged before for that Orphan.
func (l *DismissalLog) Check(name string, labels map[string]string) {
	if l == nil || l.Logger == nil {
		return
	}
	v, ok := labels[orphan.LabelDismissed]
	if _, known := orphan.ParseDismissal(v, ok); known {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[name] == v {
		return
	}
	if l.seen == nil {
		l.seen = map[string]string{}
	}
	if len(l.seen) >= maxDismissalLogNames {
		clear(l.seen)
	}
	l.seen[name] = v
	l.Logger.Warn("orphan dismissal label has an unknown value; read as dismissed (write true to dismiss, or remove the label)",
		"orphan", name, "label", orphan.LabelDismissed, "value", v)
}

// CheckDismissal logs r's dismissal label through Options.Logger if its
// value is an unknown spelling (see DismissalLog). List and Get do it
// themselves; a host that reads records from its own cache with RecordOf
// calls it for each.
func (s *Store) CheckDismissal(r orphan.Record) { s.spellings.Check(r.Name, r.Labels) }

// maxDismissalLogNames bounds DismissalLog's memory: past it, the names
// seen are forgotten and may be logged again.
const maxDismissalLogNames = 4096

// LastCopyOverridden reports whether labels carry a person's last-copy
// override (orphan.LabelLastCopyOverride=true): the host passes the names
// of such Orphans in orphan.Cycle.LastCopyOverride, which lets a requested
// purge of a faulted volume's copy through, never an automatic one.
func LastCopyOverridden(labels map[string]string) bool {
	return labels[orphan.LabelLastCopyOverride] == orphan.LabelValueLastCopyOverride
}

// WithDismissal returns a copy of labels with the dismissal label set
// (on) or removed.
func WithDismissal(labels map[string]string, on bool) map[string]string {
	out := maps.Clone(labels)
	if on {
		if out == nil {
			out = map[string]string{}
		}
		out[orphan.LabelDismissed] = orphan.LabelValueDismissed
	} else {
		delete(out, orphan.LabelDismissed)
	}
	return out
}

// requestDeletion makes sure the object carries the finalizer, then
// deletes it, so that it stays with a deletion timestamp until Delete. The
// delete is of this very object in this very version (UID and
// ResourceVersion preconditions): without the version, a change another
// writer made after Update's re-read (a forget marking it
// DataCleanable=False) would be deleted over, and a deletion request
// would be recorded against a record the Sweeper never saw.
func (s *Store) requestDeletion(ctx context.Context, u *unstructured.Unstructured) error {
	if !slices.Contains(u.GetFinalizers(), Finalizer) {
		u = u.DeepCopy()
		u.SetFinalizers(append(u.GetFinalizers(), Finalizer))
		var err error
		if u, err = s.ri.Update(ctx, u, metav1.UpdateOptions{FieldManager: s.opts.FieldManager}); err != nil {
			return err
		}
		s.wrote(u.GetName(), u)
	}
	uid, rv := u.GetUID(), u.GetResourceVersion()
	return s.ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
}

// Delete implements orphan.Store: it removes the Finalizer, then deletes
// the object if no deletion was requested. A missing object is success.
func (s *Store) Delete(ctx context.Context, name string) error {
	for range maxAttempts {
		cur, err := s.ri.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return s.wrap("delete", name, err)
		}
		if fs := cur.GetFinalizers(); slices.Contains(fs, Finalizer) {
			cur.SetFinalizers(slices.DeleteFunc(slices.Clone(fs), func(f string) bool { return f == Finalizer }))
			cur, err = s.ri.Update(ctx, cur, metav1.UpdateOptions{FieldManager: s.opts.FieldManager})
			switch {
			case apierrors.IsNotFound(err):
				s.wrote(name, nil)
				return nil // it had no other finalizer and was being deleted: gone now
			case apierrors.IsConflict(err):
				continue
			case err != nil:
				return s.wrap("delete (finalizer)", name, err)
			}
			s.wrote(name, cur)
		}
		if cur.GetDeletionTimestamp() != nil {
			if len(cur.GetFinalizers()) == 0 {
				s.wrote(name, nil) // the last finalizer is off: the object is gone
			}
			return nil // other finalizers are someone else's business
		}
		uid := cur.GetUID()
		err = s.ri.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case err == nil || apierrors.IsNotFound(err):
			s.wrote(name, nil)
			return nil
		case apierrors.IsConflict(err):
			continue // replaced by a new object of the same name meanwhile
		default:
			return s.wrap("delete", name, err)
		}
	}
	return fmt.Errorf("crstore: delete %s: %w: still changing after %d attempts", name, orphan.ErrConflict, maxAttempts)
}

// wrote reports a write to Options.OnWrite.
func (s *Store) wrote(name string, u *unstructured.Unstructured) {
	if s.opts.OnWrite != nil {
		s.opts.OnWrite(name, u)
	}
}

// wrap maps API errors to the orphan package's sentinels.
func (s *Store) wrap(op, name string, err error) error { return WrapAPIError("crstore", op, name, err) }

// ErrMalformed is wrapped by errors about objects that do not have the
// Orphan schema.
var ErrMalformed = errors.New("crstore: malformed Orphan object")

func specOf(r orphan.Record) map[string]any {
	params := make(map[string]any, len(r.Parameters))
	for k, v := range r.Parameters {
		params[k] = v
	}
	spec := map[string]any{
		"nodeID":     r.NodeID,
		"orphanType": string(r.Kind),
		"parameters": params,
	}
	if r.DataEngine != "" {
		spec["dataEngine"] = string(r.DataEngine)
	}
	return spec
}

// RecordOf reads an Orphan object, as List and Get do: a host that lists
// the records from its own informer's cache reads them with it.
func RecordOf(u *unstructured.Unstructured) (orphan.Record, error) { return recordOf(u) }

// recordOf reads an Orphan object.
func recordOf(u *unstructured.Unstructured) (orphan.Record, error) {
	bad := func(field string, err error) (orphan.Record, error) {
		return orphan.Record{}, fmt.Errorf("%w %s: %s: %v", ErrMalformed, u.GetName(), field, err)
	}
	nodeID, _, err := unstructured.NestedString(u.Object, "spec", "nodeID")
	if err != nil {
		return bad("spec.nodeID", err)
	}
	kind, _, err := unstructured.NestedString(u.Object, "spec", "orphanType")
	if err != nil {
		return bad("spec.orphanType", err)
	}
	engine, _, err := unstructured.NestedString(u.Object, "spec", "dataEngine")
	if err != nil {
		return bad("spec.dataEngine", err)
	}
	params, _, err := unstructured.NestedStringMap(u.Object, "spec", "parameters")
	if err != nil {
		return bad("spec.parameters", err)
	}
	r := orphan.Record{
		Name:              u.GetName(),
		Kind:              orphan.Kind(kind),
		NodeID:            nodeID,
		DataEngine:        orphan.DataEngine(engine),
		Parameters:        params,
		Labels:            u.GetLabels(),
		CreatedAt:         u.GetCreationTimestamp().Time,
		DeletionRequested: u.GetDeletionTimestamp() != nil,
		Dismissed:         dismissed(u),
		ResourceVersion:   u.GetResourceVersion(),
	}
	r.Conditions = MetaConditions(readConditions(u))
	return r, nil
}

// readConditions returns the object's status.conditions; entries that are
// not objects are skipped.
func readConditions(u *unstructured.Unstructured) []Condition {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	out := make([]Condition, 0, len(list))
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		out = append(out, Condition{
			Type: str("type"), Status: str("status"), Reason: str("reason"), Message: str("message"),
			LastProbeTime: str("lastProbeTime"), LastTransitionTime: str("lastTransitionTime"),
		})
	}
	return out
}

// conditionsOf converts conditions to Longhorn's type, keeping the probe
// times the object (if any) has for conditions of the same type.
func conditionsOf(u *unstructured.Unstructured, cs []metav1.Condition) []Condition {
	var old []Condition
	if u != nil {
		old = readConditions(u)
	}
	return LonghornConditions(old, cs)
}

// setStatus writes conditions (and ownerID, if not empty) into u.
func setStatus(u *unstructured.Unstructured, ownerID string, cs []metav1.Condition) {
	list := make([]any, 0, len(cs))
	for _, c := range conditionsOf(u, cs) {
		list = append(list, map[string]any{
			"type": c.Type, "status": c.Status, "reason": c.Reason, "message": c.Message,
			"lastProbeTime": c.LastProbeTime, "lastTransitionTime": c.LastTransitionTime,
		})
	}
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	status["conditions"] = list
	if ownerID != "" {
		status["ownerID"] = ownerID
	}
	u.Object["status"] = status
}
