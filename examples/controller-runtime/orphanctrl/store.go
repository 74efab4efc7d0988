package orphanctrl

import (
	"context"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/examples/kube/hostkit"
	"github.com/caretaker-storage/caretaker/orphan"
)

// maxAttempts bounds the read-modify-write retries of one call when the
// object keeps changing under it.
const maxAttempts = 10

// Store is an orphan.Store on Orphan objects through controller-runtime's
// clients. It keeps examples/kube's crstore mapping (names, labels, spec,
// finalizer, Longhorn's conditions) and its deletion rules: Update with
// DeletionRequested deletes the object (the finalizer holds it), and
// Delete removes the finalizer before deleting, so Delete never looks like
// a user's deletion request. Record.Dismissed is the label
// caretaker.io/dismissed=true, as in crstore.
//
// Reads are split on purpose:
//   - List reads through Client, normally the manager's cached client. A
//     stale list only delays a plan or plans work that the re-read stops.
//   - Get, and the read of every read-modify-write, goes through APIReader
//     (mgr.GetAPIReader(), uncached). The Sweeper calls Get at the moment
//     it purges (a purge re-checks its preconditions when it acts), so the purge re-check sees the API
//     server, never the cache.
//
// examples/kube's nodecache.Store makes the same bargain for List through
// a client-go informer; the two are not one type because each is built on
// its own host's client stack, and they share the mapping of records to
// Orphan objects through crstore instead. The Controller wraps this Store
// (or the one configured) in hostkit.Pinned, as the agent wraps its own.
//
// It is safe for concurrent use.
type Store struct {
	c         client.Client
	api       client.Reader
	namespace string
	ownerID   string
	echo      *hostkit.Echoes // the controller's, when Setup built this Store; else nil
	// spellings logs dismissal labels of unknown spelling; Setup gives it
	// the controller's Logger, and a nil one is silent.
	spellings *crstore.DismissalLog
}

var _ orphan.Store = (*Store)(nil)

// NewStore returns a Store on the Orphans of namespace (empty:
// crstore.DefaultNamespace). c writes and lists; api serves Get and every
// re-read; ownerID, if set, is written to status.ownerID of the objects it
// creates. Pass mgr.GetClient() and mgr.GetAPIReader().
func NewStore(c client.Client, api client.Reader, namespace, ownerID string) *Store {
	if namespace == "" {
		namespace = crstore.DefaultNamespace
	}
	return &Store{c: c, api: api, namespace: namespace, ownerID: ownerID}
}

// List implements orphan.Store, through the (cached) client.
func (s *Store) List(ctx context.Context, sel orphan.Selector) ([]orphan.Record, error) {
	set := client.MatchingLabels{}
	if sel.NodeID != "" {
		set[orphan.LabelNode] = sel.NodeID
	}
	if sel.Kind != "" {
		set[orphan.LabelOrphanType] = string(sel.Kind)
	}
	var list OrphanList
	if err := s.c.List(ctx, &list, client.InNamespace(s.namespace), set); err != nil {
		return nil, wrap("list", "", err)
	}
	out := make([]orphan.Record, 0, len(list.Items))
	for i := range list.Items {
		if r := recordOf(&list.Items[i]); sel.Matches(r) {
			s.spellings.Check(r.Name, r.Labels)
			out = append(out, r)
		}
	}
	return out, nil
}

// get reads one object from the API server, never from the cache.
func (s *Store) get(ctx context.Context, name string) (*Orphan, error) {
	var o Orphan
	if err := s.api.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// Get implements orphan.Store, through the API reader.
func (s *Store) Get(ctx context.Context, name string) (orphan.Record, error) {
	o, err := s.get(ctx, name)
	if err != nil {
		return orphan.Record{}, wrap("get", name, err)
	}
	s.spellings.Check(name, o.Labels)
	return recordOf(o), nil
}

// Create implements orphan.Store: the object gets the record's labels and
// crstore.Finalizer, then, in a status update, the owner and conditions.
func (s *Store) Create(ctx context.Context, r orphan.Record) (orphan.Record, error) {
	if r.Name == "" {
		return orphan.Record{}, fmt.Errorf("orphanctrl: create: %w: record has no name", orphan.ErrInvalidItem)
	}
	o := &Orphan{
		ObjectMeta: metav1.ObjectMeta{
			Name: r.Name, Namespace: s.namespace,
			Labels: crstore.WithDismissal(r.Labels, r.Dismissed), Finalizers: []string{crstore.Finalizer},
		},
		Spec: crstore.OrphanSpec{
			NodeID: r.NodeID, OrphanType: string(r.Kind), DataEngine: string(r.DataEngine),
			Parameters: maps.Clone(r.Parameters),
		},
	}
	if o.Spec.Parameters == nil {
		o.Spec.Parameters = map[string]string{}
	}
	if err := s.c.Create(ctx, o); err != nil {
		return orphan.Record{}, wrap("create", r.Name, err)
	}
	if s.ownerID != "" || len(r.Conditions) > 0 {
		o.Status.OwnerID = s.ownerID
		o.Status.Conditions = conditionsOf(o, r.Conditions)
		switch err := s.c.Status().Update(ctx, o); {
		case err == nil, apierrors.IsConflict(err):
			// On a conflict someone changed it already; the status is theirs.
		default:
			return orphan.Record{}, wrap("create (status)", r.Name, err)
		}
	}
	if r.DeletionRequested {
		return s.Update(ctx, r)
	}
	return recordOf(o), nil
}

// Update implements orphan.Store: it writes the record's conditions and,
// if DeletionRequested, deletes the object (the finalizer keeps it). A
// deletion cannot be withdrawn, so DeletionRequested=false on an object
// being deleted is ignored.
func (s *Store) Update(ctx context.Context, r orphan.Record) (orphan.Record, error) {
	for range maxAttempts {
		cur, err := s.get(ctx, r.Name)
		if err != nil {
			return orphan.Record{}, wrap("update", r.Name, err)
		}
		if r.ResourceVersion != "" && r.ResourceVersion != cur.ResourceVersion {
			return orphan.Record{}, fmt.Errorf("orphanctrl: update %s: %w: at resourceVersion %s, not %s",
				r.Name, orphan.ErrConflict, cur.ResourceVersion, r.ResourceVersion)
		}
		if r.Dismissed != crstore.Dismissed(cur.Labels) {
			cur.Labels = crstore.WithDismissal(cur.Labels, r.Dismissed)
			err := s.c.Update(ctx, cur)
			if apierrors.IsConflict(err) && r.ResourceVersion == "" {
				continue
			}
			if err != nil {
				return orphan.Record{}, wrap("update (dismissal)", r.Name, err)
			}
		}
		if want := conditionsOf(cur, r.Conditions); !slices.Equal(want, cur.Status.Conditions) {
			cur.Status.Conditions = want
			err := s.c.Status().Update(ctx, cur)
			if apierrors.IsConflict(err) && r.ResourceVersion == "" {
				continue
			}
			if err != nil {
				return orphan.Record{}, wrap("update", r.Name, err)
			}
		}
		if r.DeletionRequested && cur.DeletionTimestamp == nil {
			if err := s.requestDeletion(ctx, cur); err != nil {
				if apierrors.IsConflict(err) {
					continue
				}
				return orphan.Record{}, wrap("update (delete)", r.Name, err)
			}
			return s.Get(ctx, r.Name)
		}
		return recordOf(cur), nil
	}
	return orphan.Record{}, fmt.Errorf("orphanctrl: update %s: %w: still changing after %d attempts", r.Name, orphan.ErrConflict, maxAttempts)
}

// requestDeletion makes sure the object carries the finalizer, then
// deletes it: this very object in this very version (UID and
// ResourceVersion preconditions). Without the version, a change another
// writer made after Update's re-read (a forget marking it
// DataCleanable=False) would be deleted over, and the Sweeper would purge
// on a deletion request recorded against a record it never saw.
func (s *Store) requestDeletion(ctx context.Context, o *Orphan) error {
	if !slices.Contains(o.Finalizers, crstore.Finalizer) {
		o.Finalizers = append(o.Finalizers, crstore.Finalizer)
		if err := s.c.Update(ctx, o); err != nil {
			return err
		}
	}
	return s.c.Delete(ctx, o, client.Preconditions{UID: &o.UID, ResourceVersion: &o.ResourceVersion})
}

// Delete implements orphan.Store: it removes the finalizer, then deletes
// the object if no deletion was requested. A missing object is success.
func (s *Store) Delete(ctx context.Context, name string) (err error) {
	// Removing the finalizer of an object being deleted deletes it: its
	// DELETED event is this call's echo from the start.
	s.echo.Deleting(name, true)
	defer func() {
		if err != nil {
			s.echo.Deleting(name, false)
		}
	}()
	for range maxAttempts {
		cur, err := s.get(ctx, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return wrap("delete", name, err)
		}
		if slices.Contains(cur.Finalizers, crstore.Finalizer) {
			cur.Finalizers = slices.DeleteFunc(slices.Clone(cur.Finalizers), func(f string) bool { return f == crstore.Finalizer })
			switch err := s.c.Update(ctx, cur); {
			case apierrors.IsNotFound(err):
				return nil // it was being deleted and had no other finalizer: gone
			case apierrors.IsConflict(err):
				continue
			case err != nil:
				return wrap("delete (finalizer)", name, err)
			}
		}
		if cur.DeletionTimestamp != nil {
			return nil // other finalizers are someone else's business
		}
		switch err := s.c.Delete(ctx, cur, client.Preconditions{UID: &cur.UID}); {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			continue // replaced by a new object of the same name meanwhile
		default:
			return wrap("delete", name, err)
		}
	}
	return fmt.Errorf("orphanctrl: delete %s: %w: still changing after %d attempts", name, orphan.ErrConflict, maxAttempts)
}

// wrap maps API errors to the orphan package's sentinels.
func wrap(op, name string, err error) error { return crstore.WrapAPIError("orphanctrl", op, name, err) }

// recordOf reads an Orphan object.
func recordOf(o *Orphan) orphan.Record {
	r := orphan.Record{
		Name:              o.Name,
		Kind:              orphan.Kind(o.Spec.OrphanType),
		NodeID:            o.Spec.NodeID,
		DataEngine:        orphan.DataEngine(o.Spec.DataEngine),
		Parameters:        maps.Clone(o.Spec.Parameters),
		Labels:            maps.Clone(o.Labels),
		CreatedAt:         o.CreationTimestamp.Time,
		DeletionRequested: o.DeletionTimestamp != nil,
		Dismissed:         crstore.Dismissed(o.Labels),
		ResourceVersion:   o.ResourceVersion,
	}
	r.Conditions = crstore.MetaConditions(o.Status.Conditions)
	return r
}

// conditionsOf converts conditions to Longhorn's type, keeping the probe
// times o has for conditions of the same type.
func conditionsOf(o *Orphan, cs []metav1.Condition) []crstore.Condition {
	return crstore.LonghornConditions(o.Status.Conditions, cs)
}
