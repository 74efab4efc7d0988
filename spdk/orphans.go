package spdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// Options configure NewOrphans. Both fields are required: they are what
// the items are named after, and what Delete checks a record against.
type Options struct {
	// NodeID is the node whose SPDK the Caller reaches; it becomes
	// Item.NodeID and the scope of every item.
	NodeID string
	// InstanceManager is the name of the node's v2 instance manager; it
	// becomes the InstanceManager parameter of every item.
	InstanceManager string
}

// Orphans is the orphan.Adapter of one node's v2 runtime: engines (RAID
// bdevs) and replicas (head lvols), as items of kind
// orphan.KindEngineInstance and orphan.KindReplicaInstance with data
// engine v2 and the parameters InstanceName, InstanceUUID and
// InstanceManager. Create it with NewOrphans and hand it to
// orphan.NewMonitor (as the Inventory) and orphan.NewSweeper.
//
//   - Scan lists every engine and replica (no pre-filtering: owned items
//     are listed too, and OwnedUnlisted stays zero); each replica item
//     carries its orphan.Copy (volume, head, size, and NoData only when
//     SPDK reports no allocated cluster on any of its lvols), so the
//     last-copy guard covers it. When the records'
//     Lookup is a RecordCounter, an empty view beside runtime objects is
//     reported as NoneExpected for that kind (ScopeStatus.Groups).
//   - Judge is instance.Verdict over the host's records (a v2 replica
//     with a record in any state is owned), and an orphan verdict is
//     confirmed against SPDK: the object must still be there under the
//     item's UUID.
//   - Delete re-checks everything at the moment of deletion (see Delete).
//
// All methods are safe for concurrent use.
type Orphans struct {
	rpc     spdkrpc.Caller
	records instance.Lookup
	judge   *instance.Judge
	node    string
	im      string

	// empty holds the head UUIDs of the replicas a Scan reported as
	// holding no data (Copy.NoData): Delete proves it again before it
	// deletes one of them (see noDataClaims).
	emptyMu sync.Mutex
	empty   map[string]bool
}

var _ orphan.Adapter = (*Orphans)(nil)

// NewOrphans returns the adapter of the node's SPDK that rpc reaches
// (usually an *spdkrpc.Client), judged and re-checked against records, the host's
// engine and replica records. rpc and records are required, and so are
// opts.NodeID and opts.InstanceManager; a missing one is an error
// wrapping orphan.ErrIncomplete. records must answer from the freshest
// view the host has, and fail (not answer "no record") while that view
// is not synced: a v2 replica's lvols are deleted only when it says no
// replica record of that name exists.
func NewOrphans(rpc spdkrpc.Caller, records instance.Lookup, opts Options) (*Orphans, error) {
	var missing []string
	if rpc == nil {
		missing = append(missing, "a Caller")
	}
	if records == nil {
		missing = append(missing, "an instance.Lookup of the engine and replica records")
	}
	if opts.NodeID == "" {
		missing = append(missing, "Options.NodeID")
	}
	if opts.InstanceManager == "" {
		missing = append(missing, "Options.InstanceManager")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("spdk: NewOrphans needs %v: %w", strings.Join(missing, ", "), orphan.ErrIncomplete)
	}
	return &Orphans{rpc: rpc, records: records, judge: instance.NewJudge(records), node: opts.NodeID, im: opts.InstanceManager}, nil
}

// kinds are the kinds Orphans serves.
var kinds = []orphan.Kind{orphan.KindEngineInstance, orphan.KindReplicaInstance}

// Kinds implements orphan.Adapter: engine-instance and replica-instance.
func (o *Orphans) Kinds() []orphan.Kind { return slices.Clone(kinds) }

// DataEngines implements orphan.EngineScoped: SPDK runs the v2 data
// engine only, so orphan.Combine can run a host's v1 instance adapter on
// the same node.
func (o *Orphans) DataEngines() []orphan.DataEngine { return []orphan.DataEngine{orphan.DataEngineV2} }

// Scan implements orphan.Inventory. It lists RAID bdevs and lvols once and
// returns the engines and replicas as items, in a stable order; when there
// are replicas, it lists every bdev (bdev_get_bdevs) for their Copy, and a
// failure of that listing only leaves each Copy as one that may hold data. Objects
// with an empty UUID, and lvols that cannot be attributed, are reported in
// Snapshot.Skipped. Any RPC failure is an error, and so is a result of
// the wrong shape (null, not a list, elements that are not objects or
// have no name: ErrUnexpectedResult): a partial or unreadable listing
// would make present objects look gone.
//
// The node's scope is HealthReady, unless an engine or head lvol was
// skipped for lack of a usable UUID: then it is HealthUnknown, so that the
// cycle keeps every record of the node (one of them may be that object's),
// creates none and purges none, until SPDK reports the UUID. Longhorn's
// "Orphaned V2 Volume Runtime Resource Cleanup" (longhorn/longhorn#10933)
// skips such objects; caretaker also refuses to read their absence as
// "gone".
func (o *Orphans) Scan(ctx context.Context) (_ orphan.Snapshot, err error) {
	defer func() { err = withPrefix(err) }()
	rt, err := ReadRuntime(ctx, o.rpc)
	if err != nil {
		return orphan.Snapshot{}, err
	}
	snap := o.snapshot(rt)
	if len(rt.Replicas) > 0 {
		// Only bdev_get_bdevs tells how an lvol relates to the others
		// and how many clusters it has allocated (Longhorn's SPDK leaves
		// the count out of bdev_lvol_get_lvols). A failure is no error
		// of the scan: every copy then may hold data.
		bdevs, err := spdkrpc.BdevGetBdevs(ctx, o.rpc, "")
		fillCopies(snap.Items[len(rt.Engines):], rt.Replicas, bdevs, err)
	}
	o.noteEmpty(rt, snap.Items[len(rt.Engines):])
	snap.Skipped = append(snap.Skipped, o.exposureSkips(ctx, rt)...)
	if c, ok := o.records.(RecordCounter); ok {
		o.noteNoneExpected(ctx, c, rt, snap.Scopes)
	}
	return snap, nil
}

// noteEmpty records which of the replicas (items, in the order of
// rt.Replicas) this scan reported as holding no data. A replica's claim
// stays until a purge of it is refused for it, or a scan no longer lists
// its head: a Sweeper may decide on a snapshot older than the newest
// scan, and the claim it relied on must still be checked.
func (o *Orphans) noteEmpty(rt Runtime, items []orphan.Item) {
	o.emptyMu.Lock()
	defer o.emptyMu.Unlock()
	listed := make(map[string]bool, len(rt.Replicas))
	for i, r := range rt.Replicas {
		listed[r.UUID()] = true
		if cp := items[i].Copy; cp != nil && cp.NoData {
			if o.empty == nil {
				o.empty = make(map[string]bool)
			}
			o.empty[r.UUID()] = true
		}
	}
	for id := range o.empty {
		if !listed[id] {
			delete(o.empty, id)
		}
	}
}

// claimedEmpty reports whether a scan reported the replica whose head has
// UUID uuid as holding no data; drop forgets the claim.
func (o *Orphans) claimedEmpty(uuid string, drop bool) bool {
	o.emptyMu.Lock()
	defer o.emptyMu.Unlock()
	claimed := o.empty[uuid]
	if drop {
		delete(o.empty, uuid)
	}
	return claimed
}

// RecordCounter is an optional ability of the instance.Lookup given to
// NewOrphans: how many records the host's view holds. With it, Scan
// reports a view that holds no engine (or no replica) record while SPDK
// runs engines (or replicas) as the orphan guard's evidence
// (ScopeStatus.Groups, NoneExpected, for that kind and the v2 engine): an
// empty view beside runtime objects is a broken view far more often than
// a node of orphans, and the guard then refuses every purge of that kind
// on the node, even of one lvol. Without it, only the guard's WholeScope
// rule (every item an orphan, at least Guard.MinItems of them) catches
// an empty view.
type RecordCounter interface {
	// CountInstances returns how many records of kind
	// (orphan.KindEngineInstance or orphan.KindReplicaInstance) of the v2
	// data engine the view LookupInstance answers from holds. An error
	// means the view is not available now: the node's scope is then
	// HealthUnknown for the cycle. It may be called concurrently.
	CountInstances(ctx context.Context, kind orphan.Kind) (int, error)
}

// noteNoneExpected asks c, for each kind SPDK runs objects of, whether
// the host's view holds any record of it, and writes the answer into the
// node's scope in scopes.
func (o *Orphans) noteNoneExpected(ctx context.Context, c RecordCounter, rt Runtime, scopes map[orphan.Scope]orphan.ScopeStatus) {
	scope := orphan.Scope{NodeID: o.node}
	st := scopes[scope]
	for _, k := range kinds {
		if k == orphan.KindEngineInstance && len(rt.Engines) == 0 || k == orphan.KindReplicaInstance && len(rt.Replicas) == 0 {
			continue
		}
		n, err := c.CountInstances(ctx, k)
		switch {
		case err != nil:
			st.Health, st.Message = orphan.HealthUnknown, fmt.Sprintf("cannot tell whether the host's view holds any %s record: %v", k, err)
		case n == 0:
			if st.Groups == nil {
				st.Groups = map[orphan.Group]orphan.Evidence{}
			}
			st.Groups[orphan.Group{Kind: k, DataEngine: orphan.DataEngineV2}] = orphan.Evidence{NoneExpected: true}
		}
	}
	scopes[scope] = st
}

// Judge implements orphan.Judge. An item that is not a v2 instance of this
// node and instance manager is undecided: this adapter cannot see it. For
// the others, instance.Verdict decides over the host's records (a failed
// lookup is undecided); an orphan verdict then stands only if SPDK still
// holds the object under the item's name and UUID, so a snapshot older
// than a purge or a recreate never makes a record. A failed RPC is
// undecided too. Judge never returns an error.
func (o *Orphans) Judge(ctx context.Context, it orphan.Item) (orphan.Verdict, error) {
	name := it.Param(orphan.ParamInstanceName)
	what := string(it.Kind) + " " + name
	switch {
	case !slices.Contains(kinds, it.Kind):
		return orphan.Undecided(fmt.Sprintf("kind %q is not a runtime instance", it.Kind)), nil
	case it.DataEngine != orphan.DataEngineV2:
		return orphan.Undecided(fmt.Sprintf("%s: data engine %q is not v2", what, it.DataEngine)), nil
	case it.NodeID != o.node || it.Param(orphan.ParamInstanceManager) != o.im:
		return orphan.Undecided(fmt.Sprintf("%s: seen on node %q by instance manager %q; this adapter reaches %q and %q",
			what, it.NodeID, it.Param(orphan.ParamInstanceManager), o.node, o.im)), nil
	}
	v, err := o.judge.Judge(ctx, it)
	if err != nil || v.Outcome != orphan.OutcomeOrphan {
		return v, err
	}
	if why := o.absent(ctx, it.Kind, name, it.Param(orphan.ParamInstanceUUID)); why != "" {
		return orphan.Undecided(what + ": " + why), nil
	}
	return v, nil
}

// absent returns why the runtime object named name with UUID uuid cannot
// be confirmed present, or "" when it is there. It looks up that one
// bdev (bdev_get_bdevs with a name: an engine's RAID bdev is named after
// the engine, an lvol bdev after its UUID), not the whole runtime.
func (o *Orphans) absent(ctx context.Context, kind orphan.Kind, name, uuid string) string {
	if !usableUUID(uuid) {
		return "the item has no usable InstanceUUID"
	}
	key := uuid
	if kind == orphan.KindEngineInstance {
		key = name
	}
	bdevs, err := spdkrpc.BdevGetBdevs(ctx, o.rpc, key)
	if errors.Is(err, ErrNotFound) {
		if kind == orphan.KindEngineInstance {
			return "the RAID bdev no longer exists"
		}
		return "no lvol has the item's UUID any more: deleted, or recreated under another (" + uuidMismatch + ")"
	}
	if err != nil {
		return fmt.Sprintf("runtime not readable: %v", err)
	}
	if kind == orphan.KindEngineInstance {
		for _, b := range bdevs {
			if b.Name == name && b.ProductName == spdkrpc.ProductRaidVolume {
				if b.UUID != uuid {
					return fmt.Sprintf("%s: RAID bdev UUID is %q, the item has %q", uuidMismatch, b.UUID, uuid)
				}
				return ""
			}
		}
		return "no RAID bdev of that name"
	}
	lvols, err := lvolsOf(bdevs)
	if err != nil {
		return fmt.Sprintf("runtime not readable: %v", err)
	}
	for _, l := range lvols {
		if l.UUID == uuid && l.Name == name && !l.IsSnapshot {
			return ""
		}
	}
	return fmt.Sprintf("%s: the lvol with the item's UUID is not the head lvol %s", uuidMismatch, name)
}

// snapshot turns a Runtime into the items, scope and skipped entries Scan
// returns.
func (o *Orphans) snapshot(rt Runtime) orphan.Snapshot {
	scope := orphan.Scope{NodeID: o.node}
	status := orphan.ScopeStatus{Health: orphan.HealthReady}
	for _, s := range rt.Skipped {
		if s.NoUUID {
			status = orphan.ScopeStatus{Health: orphan.HealthUnknown, Message: s.Kind + " " + s.Name + " has no usable UUID: its record cannot be matched this cycle"}
			break
		}
	}
	snap := orphan.Snapshot{
		Items:  make([]orphan.Item, 0, len(rt.Engines)+len(rt.Replicas)),
		Scopes: map[orphan.Scope]orphan.ScopeStatus{scope: status},
	}
	for _, e := range rt.Engines {
		snap.Items = append(snap.Items, o.item(orphan.KindEngineInstance, e.Name, e.UUID))
	}
	for _, r := range rt.Replicas {
		snap.Items = append(snap.Items, o.item(orphan.KindReplicaInstance, r.Name(), r.UUID()))
	}
	for _, s := range rt.Skipped {
		snap.Skipped = append(snap.Skipped, orphan.Skipped{Scope: scope, Name: s.Name, Reason: s.Kind + ": " + s.Reason})
	}
	return snap
}

func (o *Orphans) item(kind orphan.Kind, name, uuid string) orphan.Item {
	return orphan.Item{
		Kind:       kind,
		NodeID:     o.node,
		DataEngine: orphan.DataEngineV2,
		Parameters: map[string]string{
			orphan.ParamInstanceName:    name,
			orphan.ParamInstanceUUID:    uuid,
			orphan.ParamInstanceManager: o.im,
		},
	}
}

// findEngine returns the RAID bdev named name, and whether it exists.
func findEngine(ctx context.Context, c spdkrpc.Caller, name string) (spdkrpc.RaidBdev, bool, error) {
	raids, err := spdkrpc.BdevRaidGetBdevs(ctx, c, spdkrpc.RaidCategoryAll)
	if err != nil {
		return spdkrpc.RaidBdev{}, false, err
	}
	i := slices.IndexFunc(raids, func(r spdkrpc.RaidBdev) bool { return r.Name == name })
	if i < 0 {
		return spdkrpc.RaidBdev{}, false, nil
	}
	return raids[i], true, nil
}
