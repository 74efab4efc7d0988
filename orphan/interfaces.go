package orphan

import (
	"context"
	"errors"

	"github.com/caretaker-storage/caretaker/internal/errclass"
)

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -source=interfaces.go -destination=mocks/mocks.go -package=mocks

// Inventory observes what exists: replica directories on a node's disks,
// runtime instances, failed backups.
type Inventory interface {
	// Scan observes once and returns what it saw. The Monitor calls it from
	// one goroutine at a time; a host calling it directly must not call it
	// concurrently with itself unless the implementation says it may.
	//
	// Scan reports per-scope trouble (a disk whose UUID changed, a replicas
	// directory it cannot read) in Snapshot.Scopes rather than as an error,
	// so one bad disk does not hide the others. An error means nothing in
	// the snapshot can be trusted; it is retried on the next period.
	// Inventories should list items in a stable order, or the Monitor sees
	// a change on every scan.
	//
	// Pre-filtering: an Inventory may leave out of Snapshot.Items the
	// items it already knows to be owned (diskscan lists only the
	// directories no replica expects, which is what makes a scan of a
	// large disk cheap). It must then count them in the scope's
	// ScopeStatus.OwnedUnlisted, so the Guard weighs them, and its Judge
	// must still judge any item of the kind correctly (Sweeper re-judges
	// at the moment of a purge). This is the one way caretaker's adapters
	// pre-filter; an Inventory that lists every item leaves
	// OwnedUnlisted zero.
	Scan(ctx context.Context) (Snapshot, error)
}

// Judge decides whether an item is owned by something in the cluster.
type Judge interface {
	// Judge returns the verdict for one item. It is called by the host's
	// planning step and by Sweeper right before a purge, possibly from
	// several goroutines at once: implementations must be safe for
	// concurrent use.
	//
	// When the cluster state needed is not available (a cache not synced,
	// an API error) it returns an OutcomeUndecided verdict, not an error;
	// an error is for a broken judge and fails the whole cycle.
	Judge(ctx context.Context, item Item) (Verdict, error)
}

// Store keeps orphan records: Orphan custom resources, or the in-memory
// MemStore. All methods may be called concurrently. A Store holds records
// of any kind, including kinds caretaker's table does not know (another
// owner's, such as Longhorn's shard-instance), and lists them unchanged:
// the planner leaves them alone (see Kind.Valid).
type Store interface {
	// List returns the records that match the selector (all records for
	// the zero Selector), in any order. The returned records are the
	// caller's to modify.
	List(ctx context.Context, sel Selector) ([]Record, error)

	// Get returns one record, or an error wrapping ErrNotFound.
	Get(ctx context.Context, name string) (Record, error)

	// Create stores a new record and returns it as stored (with its
	// ResourceVersion and, if the store sets it, CreatedAt). A record of
	// that name that exists already is an error wrapping ErrAlreadyExists.
	// Create must not modify r's maps and slices, nor keep them: a plan's
	// new records share them (copy what you keep, as MemStore does).
	Create(ctx context.Context, r Record) (Record, error)

	// Update replaces a record's DeletionRequested, Dismissed and
	// Conditions (other fields are immutable and ignored). If
	// r.ResourceVersion is not empty and stale, it fails with ErrConflict,
	// which is retryable after a fresh Get. A missing record is
	// ErrNotFound.
	//
	// Dismissed is a user's: a Store keeps it with the record, as its own
	// state, for as long as the record exists (Create stores it, Get and
	// List return it, Update replaces it), and never clears it by itself.
	// A Kubernetes Store keeps it as the label LabelDismissed=true, so a
	// user dismisses with kubectl label; caretaker's drivers only ever
	// write it back as they read it (the Sweeper updates a fresh read of
	// each record). Deleting the record drops the dismissal with it: a
	// dismissal lives exactly as long as its record, which is why Decide
	// never forgets a dismissed record while its data is there.
	Update(ctx context.Context, r Record) (Record, error)

	// Delete removes a record. A record that is already gone is success.
	// Delete never touches the orphan's data.
	Delete(ctx context.Context, name string) error
}

// Selector filters List. Empty fields match everything.
type Selector struct {
	NodeID string
	Kind   Kind
}

// Matches reports whether r is selected.
func (s Selector) Matches(r Record) bool {
	return (s.NodeID == "" || r.NodeID == s.NodeID) && (s.Kind == "" || r.Kind == s.Kind)
}

// Deleter removes an orphan's data.
type Deleter interface {
	// Delete purges the data the record describes. It is called only for
	// records whose deletion was requested and that were judged orphans in
	// this very cycle, and it must re-check at the moment it acts that the
	// data is still the orphan the record describes (same disk UUID and
	// filesystem, same runtime UUID, still not claimed by anything); if
	// not, it deletes nothing and returns an error wrapping
	// ErrPreconditionFailed.
	//
	// Data that is already gone is success (nil). Sweeper calls Delete for
	// different records concurrently, never twice at once for one record.
	// Errors other than ErrPreconditionFailed are retried on a later sweep.
	Delete(ctx context.Context, r Record) error
}

// Sentinel errors, for errors.Is.
var (
	// ErrNotFound: the record does not exist. It is the same value in
	// every caretaker package.
	ErrNotFound = errclass.ErrNotFound
	// ErrAlreadyExists: a record of that name exists already.
	ErrAlreadyExists = errors.New("orphan: already exists")
	// ErrConflict: the record changed since it was read; read it again and retry.
	ErrConflict = errors.New("orphan: conflict")
	// ErrPreconditionFailed: a Deleter refused to purge because what it found
	// at the moment of deletion is no longer the recorded orphan. Nothing
	// was deleted; the next plan forgets or re-judges the record.
	ErrPreconditionFailed = errors.New("orphan: precondition failed, nothing deleted")
	// ErrInvalidItem: an item lacks a field its name is computed from, or has
	// an unknown kind.
	ErrInvalidItem = errors.New("orphan: invalid item")
	// ErrNoAdapter: no Adapter of a Combine serves the record's kind.
	ErrNoAdapter = errors.New("orphan: no adapter for kind")
)

// KindError says which kind an error is about.
type KindError struct {
	Kind Kind
	Err  error
}

func (e *KindError) Error() string { return e.Err.Error() + ": " + string(e.Kind) }

// Unwrap returns the cause.
func (e *KindError) Unwrap() error { return e.Err }

// JudgeFunc adapts a function to Judge.
type JudgeFunc func(ctx context.Context, item Item) (Verdict, error)

// Judge calls f.
func (f JudgeFunc) Judge(ctx context.Context, item Item) (Verdict, error) { return f(ctx, item) }

// InventoryFunc adapts a function to Inventory.
type InventoryFunc func(ctx context.Context) (Snapshot, error)

// Scan calls f.
func (f InventoryFunc) Scan(ctx context.Context) (Snapshot, error) { return f(ctx) }

// DeleterFunc adapts a function to Deleter.
type DeleterFunc func(ctx context.Context, r Record) error

// Delete calls f.
func (f DeleterFunc) Delete(ctx context.Context, r Record) error { return f(ctx, r) }

// Finisher is an optional ability of a Deleter: finishing purges that a
// crash interrupted (a directory renamed to a tombstone but not yet
// removed). Sweeper.Sync calls FinishInterrupted once per sync when its
// Adapter has it. It must only touch what the Deleter itself left behind.
type Finisher interface {
	FinishInterrupted(ctx context.Context) error
}
