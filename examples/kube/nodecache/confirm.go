package nodecache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/orphan"
)

// ErrUnconfirmed is wrapped by the errors of a Confirmer that could not
// check the narrow view against a complete one: the list failed, or it
// was not consistent where a purge needs it to be. Nothing is recorded or
// purged on the narrow view's word meanwhile.
var ErrUnconfirmed = errors.New("nodecache: orphan candidates not confirmed against a complete list of the Replicas")

// Confirmer checks a node's narrow view of the Replicas (the ones its
// labels select, longhornnode and longhorndiskuuid) against a complete
// view: every Replica of the namespace, listed in pages at one resource
// version. A label can be stale or missing (longhorn-manager's DataStore
// sets them from the spec in CreateReplica and UpdateReplica; any other
// writer can leave them wrong, and nothing at the API server recomputes
// them), and a replica missing from the narrow view makes its live
// directory look orphaned. So what the narrow view alone finds orphaned
// is confirmed before it is recorded (Candidates), and again before
// anything is purged (BeforePurge).
//
// A confirmation is a full list, which costs the API server the whole
// namespace's Replicas (the wide list the narrow view saves at every
// start), so it runs only when needed: when a sweep finds a candidate no
// earlier confirmation covered, and before the first purge of a sweep;
// at most once per sweep (BeginSweep), and never in a sweep that has no
// new candidate and purges nothing. The replicas it finds claiming a
// directory on the node (by the claims rule given to NewConfirmer) that
// the narrow view does not hold are kept (Claims) until the next
// confirmation, so a host adds them to its expected set beside the narrow
// view's. (Only those: a replica the narrow view holds leaves the
// expected set when it is deleted, and its directory becomes a candidate;
// a kept one is dropped only by the next confirmation, so the directory
// of a mislabelled replica deleted meanwhile waits for it.)
//
// It is safe for concurrent use; confirmations are serialized.
type Confirmer struct {
	ri       dynamic.ResourceInterface
	claims   func(diskscan.ReplicaRef) bool
	held     func(diskscan.ReplicaRef) bool
	onClaims func([]diskscan.ReplicaRef)

	lists atomic.Int64 // full lists taken

	mu        sync.Mutex
	sweep     uint64                         // BeginSweep's count
	takenIn   uint64                         // the sweep of the last confirmation (0: none)
	consistV  bool                           // whether the last one was read at one version
	found     map[string]diskscan.ReplicaRef // by name: the last confirmation's claims
	confirmed map[string]bool                // candidates a confirmation covered
}

// NewConfirmer returns a Confirmer listing ri (the namespace's Replicas).
// claims says whether a replica can claim a directory on the node (the
// rule the narrow view's stores apply), held whether the narrow view
// holds it now (nil: never); onClaims, if not nil, is called
// with the new claims after a confirmation whose claims differ from the
// last one's, before Candidates or BeforePurge returns, so that the
// host's expected set has them when the sweep goes on. It must not call
// the Confirmer.
func NewConfirmer(ri dynamic.ResourceInterface, claims, held func(diskscan.ReplicaRef) bool, onClaims func([]diskscan.ReplicaRef)) *Confirmer {
	if held == nil {
		held = func(diskscan.ReplicaRef) bool { return false }
	}
	return &Confirmer{ri: ri, claims: claims, held: held, onClaims: onClaims, found: map[string]diskscan.ReplicaRef{}, confirmed: map[string]bool{}}
}

// BeginSweep starts a new sweep: the next Candidates or BeforePurge that
// needs a confirmation takes a new one.
func (c *Confirmer) BeginSweep() {
	c.mu.Lock()
	c.sweep++
	c.mu.Unlock()
}

// FullLists is the number of full lists taken so far.
func (c *Confirmer) FullLists() int64 { return c.lists.Load() }

// Claims returns the replicas the last confirmation found claiming a
// directory on the node that the narrow view did not hold, in no order.
func (c *Confirmer) Claims() []diskscan.ReplicaRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Values(c.found))
}

// CandidateKey names an orphan candidate for Candidates: the disk's UUID
// and the directory's name.
func CandidateKey(it orphan.Item) string {
	return it.Param(orphan.ParamDiskUUID) + "/" + it.Param(orphan.ParamDataName)
}

// Candidates is called with the orphan candidates of a sweep (by
// CandidateKey) before anything is recorded. If every one was covered by
// an earlier confirmation it returns (false, nil) at no cost. Otherwise
// it confirms (once per sweep) and returns whether the claims changed: if
// they did, onClaims has handed them to the host, whose expected set now
// holds replicas its scan did not know (a Sweeper judges each item again
// with the Judge, which reads that set, before recording it). An error
// (wrapping ErrUnconfirmed) means the candidates could not be confirmed:
// the sweep records nothing.
//
// A confirmation covers the candidates it was taken for; a candidate seen
// later (or seen again after it went away) needs a new one. A list that
// had to be resumed at a later version (ListPages) still confirms
// candidates for recording: a record deletes nothing, and the purge
// confirms again (BeforePurge), consistently.
func (c *Confirmer) Candidates(ctx context.Context, cands map[string]bool) (changed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	covered := true
	for k := range cands {
		if !c.confirmed[k] {
			covered = false
			break
		}
	}
	if covered {
		c.confirmed = maps.Clone(cands) // forget the ones gone
		return false, nil
	}
	changed, err = c.confirmLocked(ctx)
	if err != nil {
		return false, err
	}
	c.confirmed = maps.Clone(cands)
	return changed, nil
}

// BeforePurge is called before each purge of a sweep. The first call of
// a sweep that has no consistent confirmation yet takes one; the next
// calls of the sweep cost nothing. After it returns nil, the host's
// expected set holds every replica that claimed a directory on the node
// at the confirmation's resource version, so the purge's own re-check
// (diskscan's ErrStillExpected) refuses a claimed directory. An error
// wraps ErrUnconfirmed: the purge must not run.
func (c *Confirmer) BeforePurge(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.takenIn == c.sweep && c.takenIn != 0 && c.consistV {
		return nil
	}
	if _, err := c.confirmLocked(ctx); err != nil {
		return err
	}
	if !c.consistV {
		return fmt.Errorf("%w: the list's continue token expired and the rest was read at a later version; the purge waits for the next sweep", ErrUnconfirmed)
	}
	return nil
}

// confirmLocked takes a full list and keeps its claims; c.mu is held.
func (c *Confirmer) confirmLocked(ctx context.Context) (changed bool, err error) {
	c.lists.Add(1)
	found := map[string]diskscan.ReplicaRef{}
	res, err := ListPages(ctx, c.ri, metav1.ListOptions{}, func(page *unstructured.UnstructuredList) error {
		for i := range page.Items {
			r := longhorn.ReplicaRefOf(&page.Items[i])
			if c.claims(r) && !c.held(r) {
				found[page.Items[i].GetNamespace()+"/"+page.Items[i].GetName()] = r
			}
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrUnconfirmed, err)
	}
	// A resumed (inconsistent) list still adds what it found: more claims
	// only keep more data. It confirms no purge (BeforePurge).
	changed = !maps.Equal(found, c.found)
	c.found, c.takenIn, c.consistV = found, c.sweep, res.Consistent()
	if changed && c.onClaims != nil {
		c.onClaims(slices.Collect(maps.Values(found)))
	}
	return changed, nil
}

// ConfirmingDeleter wraps a Deleter so that each purge is confirmed
// first (Confirmer.BeforePurge): a purge whose confirmation fails returns
// its error and deletes nothing.
type ConfirmingDeleter struct {
	orphan.Deleter
	C *Confirmer
}

// Delete confirms, then deletes through the wrapped Deleter.
func (d ConfirmingDeleter) Delete(ctx context.Context, r orphan.Record) error {
	if err := d.C.BeforePurge(ctx); err != nil {
		return err
	}
	return d.Deleter.Delete(ctx, r)
}

// FinishInterrupted finishes the wrapped Deleter's interrupted purges,
// when it is an orphan.Finisher (nothing otherwise): what it finishes was
// renamed to a tombstone by a purge that was confirmed, and is no
// replica's directory any more.
func (d ConfirmingDeleter) FinishInterrupted(ctx context.Context) error {
	if f, ok := d.Deleter.(orphan.Finisher); ok {
		return f.FinishInterrupted(ctx)
	}
	return nil
}

// Unrecorded is the candidate set Candidates takes for a sweep: the key
// (CandidateKey) of every item of snap that has no record in recs. A
// candidate whose record exists was confirmed when it was recorded (by
// this process or the one before a restart), so it needs no full list
// until its purge (BeforePurge).
func Unrecorded(snap orphan.Snapshot, recs []orphan.Record) map[string]bool {
	recorded := make(map[string]bool, len(recs))
	for _, r := range recs {
		recorded[r.Name] = true
	}
	cands := make(map[string]bool, len(snap.Items))
	for _, it := range snap.Items {
		if name, err := it.Name(); err == nil && recorded[name] {
			continue
		}
		cands[CandidateKey(it)] = true
	}
	return cands
}
