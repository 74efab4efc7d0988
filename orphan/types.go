package orphan

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/internal/longhorn"
)

// Kind is what an orphan is, spelled as Longhorn's spec.orphanType.
type Kind string

// The kinds of orphan. The first three are Longhorn's; KindBackup is
// caretaker's addition for failed backups.
const (
	KindReplicaData     Kind = "replica"          // a replica data directory on a v1 disk
	KindEngineInstance  Kind = "engine-instance"  // an engine runtime object (v1 process or v2 RAID bdev)
	KindReplicaInstance Kind = "replica-instance" // a replica runtime object (v1 process or v2 head lvol)
	KindBackup          Kind = "backup"           // a failed backup in a backupstore
)

// DataEngine is Longhorn's data engine of an orphan: DataEngineV1 (files
// and processes) or DataEngineV2 (SPDK). rebuild uses the same type.
type DataEngine = longhorn.DataEngine

// The data engines.
const (
	DataEngineV1 = longhorn.DataEngineV1
	DataEngineV2 = longhorn.DataEngineV2
)

// Parameter keys, as Longhorn writes them in spec.parameters.
const (
	ParamDataName        = "DataName"        // replica data: the directory name under <disk>/replicas
	ParamDiskName        = "DiskName"        // replica data: the disk's name in the node spec
	ParamDiskUUID        = "DiskUUID"        // replica data: diskUUID from longhorn-disk.cfg
	ParamDiskPath        = "DiskPath"        // replica data: the disk's mount path
	ParamDiskType        = "DiskType"        // replica data: "filesystem" or "block"
	ParamInstanceName    = "InstanceName"    // instances: engine or replica name
	ParamInstanceUUID    = "InstanceUUID"    // instances: runtime UUID (RAID bdev or head lvol UUID for v2)
	ParamInstanceManager = "InstanceManager" // instances: the instance manager that runs it

	// Backup orphans are caretaker's own; Longhorn never shipped them.
	ParamBackupTarget = "BackupTarget" // backup: the backup target's name
	ParamBackupVolume = "BackupVolume" // backup: the backup volume (volume name)
	ParamBackupName   = "BackupName"   // backup: the backup's name, e.g. backup-0123456789abcdef
)

// Label keys and values Longhorn puts on Orphan objects.
const (
	LabelComponent       = "longhorn.io/component"
	LabelManagedBy       = "longhorn.io/managed-by"
	LabelOrphanType      = "longhorn.io/orphan-type"
	LabelNode            = "longhornnode"
	LabelInstanceManager = "longhorninstancemanager"
	LabelEngine          = "longhornengine"  // engine instances: the engine's name
	LabelReplica         = "longhornreplica" // replica instances: the replica's name

	LabelValueComponent = "orphan"
	LabelValueManagedBy = "longhorn-manager"
)

// LabelDismissed is the label a Kubernetes Store keeps Record.Dismissed
// in; a Store writes it with the value LabelValueDismissed. It is
// caretaker's own (Longhorn has no dismissal):
//
//	kubectl -n longhorn-system label orphan NAME caretaker.io/dismissed=true
//	kubectl -n longhorn-system label orphan NAME caretaker.io/dismissed-
//
// A Store reads it with ParseDismissal, which errs on the side of keeping
// data: any value that is not a clear "no" dismisses.
const (
	LabelDismissed      = "caretaker.io/dismissed"
	LabelValueDismissed = "true"
)

// ParseDismissal reads the value of a LabelDismissed label (present says
// the label is there at all). A dismissal keeps data, so only a clear
// "no" is taken as one: a missing label, an empty value, "0", or "false",
// "no", "off", "f", "n" in any case (surrounding spaces ignored). Every
// other value dismisses: "true", "1", "yes", "on", "t", "y" in any case as
// a known spelling (known true), and anything else, "True!" or "dismiss"
// say, as an unknown spelling (known false) that the host should log, so
// that the person who wrote it learns that it was read as a dismissal.
func ParseDismissal(value string, present bool) (dismissed, known bool) {
	if !present {
		return false, true
	}
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "", "0", "false", "no", "off", "f", "n":
		return false, true
	case "1", "true", "yes", "on", "t", "y":
		return true, true
	}
	return true, false
}

// LabelLastCopyOverride is the label by which a person confirms that this
// copy may be purged although its volume is faulted, with the value
// LabelValueLastCopyOverride; any other value, or none, is no override. It
// lets a requested deletion through, never an automatic one: a Kubernetes
// host passes the names of the Orphans that carry it in
// Cycle.LastCopyOverride, and the last-copy guard (see VolumeState) still
// keeps the data until the Orphan is also deleted. It is caretaker's own
// (Longhorn has no last-copy guard):
//
//	kubectl -n longhorn-system label orphan NAME caretaker.io/last-copy-override=true
//	kubectl -n longhorn-system delete orphan NAME
const (
	LabelLastCopyOverride      = "caretaker.io/last-copy-override"
	LabelValueLastCopyOverride = "true"
)

// NamePrefix starts every orphan record name.
const NamePrefix = "orphan-"

// Condition types, as Longhorn spells them on Orphan objects.
const (
	ConditionDataCleanable = "DataCleanable"
	ConditionInstanceExist = "InstanceExist"
	ConditionError         = "Error"
)

// Item is one thing an Inventory observed that may be an orphan: a replica
// directory, a runtime instance, a failed backup.
//
// Items are plain values; Parameters is never modified by caretaker.
type Item struct {
	Kind       Kind
	NodeID     string
	DataEngine DataEngine
	Parameters map[string]string

	// Copy is what an inspection of the item's data found about it as a
	// copy of a volume (replica data: the volume it belongs to and whether
	// its data could be recovered from it); nil when nobody inspected it.
	// It never changes the item's record name.
	Copy *Copy
}

// Copy is what an inspection of an orphan's data found about it as a copy
// of a volume's data. The last-copy guard reads it (see VolumeState): it
// covers every Copy but a NoData one.
type Copy struct {
	// Volume is the volume the data belongs to.
	Volume string
	// Recoverable says a tool can read the volume's data back from this
	// copy today (for a Longhorn v1 replica directory: its layer chain is
	// whole, it was not rebuilding, and its backing image, if any, is a
	// raw file on its disk). It decides ConditionRecoverable, not the
	// last-copy guard: a copy that is not recoverable still holds data.
	Recoverable bool
	// Reasons say why the copy is not recoverable, each with what a person
	// can do about it where the inspection knows; empty when it is.
	Reasons []string
	// NoData says the inspection proved that the copy holds none of the
	// volume's data (for example: no layer file has an allocated extent).
	// It is the only thing that takes a copy out of the last-copy guard:
	// a copy that holds data but cannot be read back by a tool today
	// (Recoverable false) is still the volume's data. The zero value,
	// "may hold data", is the safe one.
	NoData bool
	// Revision is the copy's revision counter, 0 when it has none.
	Revision int64
	// Rank is the copy's place among the copies of its volume that the
	// inspector saw, 1 for the best recoverable one; 0 when not ranked or
	// not recoverable.
	Rank int
	// Head and Size are what a host needs, besides the record's directory
	// and disk, to re-adopt a recoverable copy as a failed replica of its
	// volume (longhorn/longhorn#10726): the head image's name and the
	// volume's size in bytes the copy holds. Empty when not known.
	Head string
	Size int64
}

// Param returns the parameter key, or "" if it is not set.
func (it Item) Param(key string) string { return it.Parameters[key] }

// Scope returns the part of the cluster the item belongs to: its node
// and, for a kind with a ScopeParam (replica data: the disk), that part
// of the node.
func (it Item) Scope() Scope {
	if s := specOf(it.Kind); s != nil && s.ScopeParam != "" {
		return Scope{NodeID: it.NodeID, Disk: it.Param(s.ScopeParam)}
	}
	return Scope{NodeID: it.NodeID}
}

// Name returns the item's deterministic record name, byte-compatible with
// Longhorn's: "orphan-" followed by the lowercase hex SHA-256 of the
// kind's NameFields joined by "-" and trimmed of surrounding white space:
//
//	replica data:  <nodeID>-<diskName>-<diskPath>-<diskUUID>-<dataName>
//	instances:     <instanceName>-<instanceUUID>-<instanceManager>-<dataEngine>
//	backup:        <backupTarget>-<backupVolume>-<backupName>  (caretaker's own)
//
// Instances are engines, replicas and Longhorn's shards and shard groups,
// which caretaker names but does not handle (KindShardInstance). It
// returns an error wrapping ErrInvalidItem if the kind is unknown, if a
// field the formula needs is empty (two different items must never share
// a name because one of them lacked a field), or if the name of the data
// itself (the kind's MatchParam: DataName, InstanceName, BackupName) is
// path-like: ".", "..", or holding a slash or a NUL. No scan lists such
// an item, and a plan must never hand one to a deleter that joins the
// name to a path; Longhorn names whatever it is given (ReplicaDataName
// and InstanceName still do), caretaker refuses it, so Decide neither
// records nor purges it and forgets a record of it (ReasonMismatch).
func (it Item) Name() (string, error) {
	sum, err := it.nameSum()
	if err != nil {
		return "", err
	}
	return sum.name(), nil
}

// nameSum is the SHA-256 a record name spells in hex: two names are equal
// exactly when their sums are.
type nameSum [sha256.Size]byte

// nameLen is the length of every computed record name.
const nameLen = len(NamePrefix) + 2*sha256.Size

// nameSum is Name without spelling it: the planner compares and sorts
// sums, and spells only the names of the records it creates.
func (it Item) nameSum() (nameSum, error) {
	return it.nameSumOf(nameSpecOf(it.Kind), "")
}

// nameSumOf is nameSum with the item's spec already found (nil: the kind
// is unknown).
func (it *Item) nameSumOf(s *KindSpec, disk string) (nameSum, error) {
	var stack [512]byte
	key, err := it.appendNameKeyIn(stack[:0], s, disk)
	if err != nil {
		return nameSum{}, err
	}
	return sha256.Sum256(key), nil
}

// appendNameKeyIn appends to buf the string whose SHA-256 the item's
// name spells: the spec's NameFields joined by "-" and trimmed of
// surrounding white space, as Longhorn does. Trimming the joined string
// equals trimming the front of the first field and the back of the last
// one, because the fields are non-empty and joined by '-', which is not
// white space; that lets the planner name a million items without
// building a string. It fails like Name. The item's scope parameter
// (ScopeParam: the disk) was read already, as disk: the planner reads it
// for the scope, and each look-up in a Parameters map costs. An empty
// disk is looked up again.
func (it *Item) appendNameKeyIn(buf []byte, s *KindSpec, disk string) ([]byte, error) {
	if s == nil {
		return buf, fmt.Errorf("%w: unknown kind %q", ErrInvalidItem, it.Kind)
	}
	last := len(s.NameFields) - 1
	for i, f := range s.NameFields {
		var v string
		if disk != "" && f == s.ScopeParam {
			v = disk
		} else {
			v = it.field(f)
		}
		if v == "" {
			return buf, fmt.Errorf("%w: %s item has no %s", ErrInvalidItem, it.Kind, f)
		}
		if f == s.MatchParam && pathLike(v) {
			return buf, fmt.Errorf("%w: %s item's %s %q is path-like", ErrInvalidItem, it.Kind, f, v)
		}
		if i == 0 {
			v = strings.TrimLeftFunc(v, unicode.IsSpace)
		}
		if i == last {
			v = strings.TrimRightFunc(v, unicode.IsSpace)
		}
		if i > 0 {
			buf = append(buf, '-')
		}
		buf = append(buf, v...)
	}
	return buf, nil
}

// pathLike reports whether the name of an item's data (its kind's
// MatchParam) is one no scan lists and a deleter that joins it to a path
// would leave its directory by: "." or "..", or one with a slash or a
// NUL.
func pathLike(v string) bool {
	return v == "." || v == ".." || strings.ContainsAny(v, "/\x00")
}

// name spells the record name: NamePrefix and the sum in lower-case hex.
func (sum *nameSum) name() string {
	var out [nameLen]byte
	sum.appendName(out[:0])
	return string(out[:])
}

// appendName appends the record name. A new record's name is spelled a
// byte pair at a time from a table: encoding/hex goes a nibble at a time,
// and spelling half a million names was a tenth of planning them.
func (sum *nameSum) appendName(b []byte) []byte {
	b = append(b, NamePrefix...)
	n := len(b)
	b = slices.Grow(b, 2*len(sum))[:n+2*len(sum)]
	out := b[n:]
	for i, v := range sum {
		binary.LittleEndian.PutUint16(out[2*i:], hexPairs[v])
	}
	return b
}

// hexPairs is each byte's two lower-case hex digits, first digit in the
// low byte.
var hexPairs = func() (t [256]uint16) {
	const digits = "0123456789abcdef"
	for v := range t {
		t[v] = uint16(digits[v>>4]) | uint16(digits[v&0xf])<<8
	}
	return t
}()

// parseName returns the sum a record name spells, and false when the
// name is not NamePrefix followed by 64 lower-case hex digits, the only
// form a computed name takes: such a name is no item's.
func parseName(name string) (nameSum, bool) {
	var sum nameSum
	if len(name) != nameLen || name[:len(NamePrefix)] != NamePrefix {
		return sum, false
	}
	h := name[len(NamePrefix):]
	var bad byte
	for i := range sum {
		hi, lo := unhex[h[2*i]], unhex[h[2*i+1]]
		bad |= hi | lo
		sum[i] = hi<<4 | lo&0xf
	}
	if bad > 0xf { // a byte that is no lower-case hex digit
		return nameSum{}, false
	}
	return sum, true
}

// unhex is the value of each lower-case hex digit and 0xff for every
// other byte: a table, because which branch a random digit takes cannot
// be predicted.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c] = c - 'a' + 10
	}
	return t
}()

// Labels returns the labels Longhorn puts on the item's record: the fixed
// ones, the node, and the kind's LabelParams. As longhorn-manager's
// GetOrphanLabelsFor* functions (types/types.go) do, the node and every
// label of the kind's are written even when their value is empty
// (longhornnode="" for an instance item seen without a node); the kinds
// caretaker names but does not handle (KindShardInstance,
// KindShardGroupInstance) get their labels too. A kind no table holds
// gets the fixed labels and the node.
func (it Item) Labels() map[string]string {
	l := map[string]string{
		LabelComponent:  LabelValueComponent,
		LabelManagedBy:  LabelValueManagedBy,
		LabelOrphanType: string(it.Kind),
		LabelNode:       it.NodeID,
	}
	if s := nameSpecOf(it.Kind); s != nil {
		for label, param := range s.LabelParams {
			l[label] = it.Param(param)
		}
	}
	return l
}

// NewRecord returns the record to create for the item, created at now. It
// fails like Name.
func NewRecord(it Item, now time.Time) (Record, error) {
	name, err := it.Name()
	if err != nil {
		return Record{}, err
	}
	return newRecord(it, name, now), nil
}

// newRecord is NewRecord for an item already named.
func newRecord(it Item, name string, now time.Time) Record {
	return Record{
		Name:       name,
		Kind:       it.Kind,
		NodeID:     it.NodeID,
		DataEngine: it.DataEngine,
		Parameters: maps.Clone(it.Parameters),
		Labels:     it.Labels(),
		CreatedAt:  now,
	}
}

// Record is an orphan record as a Store keeps it: Longhorn's Orphan object
// with what caretaker needs of its metadata and status.
type Record struct {
	Name       string
	Kind       Kind
	NodeID     string
	DataEngine DataEngine
	Parameters map[string]string
	Labels     map[string]string

	// CreatedAt is when the record was created; the auto-deletion grace
	// period counts from it.
	CreatedAt time.Time

	// DeletionRequested says a user, or the auto-deletion policy, asked for
	// the orphan's data to be purged. In Kubernetes it is a set deletion
	// timestamp on the object.
	DeletionRequested bool

	// Dismissed says a user dismissed the orphan: its data is kept and
	// never purged, auto-deletion passes it by, and the record stays (so
	// the next scan does not find the data anew). Clearing it returns the
	// record to the normal rules. A Store keeps it as the record's own
	// state (see Store); in Kubernetes, a label (examples/kube uses
	// LabelDismissed). A dismissal is caretaker's own: Longhorn has none
	// (longhorn/longhorn#11286 asks for one).
	Dismissed bool

	// Conditions are the record's status conditions (DataCleanable, ...).
	Conditions []metav1.Condition

	// ResourceVersion is opaque to caretaker and owned by the Store: Update
	// fails with ErrConflict when it is stale. Empty means unconditional.
	ResourceVersion string
}

// Item returns the item the record describes.
func (r Record) Item() Item {
	return Item{Kind: r.Kind, NodeID: r.NodeID, DataEngine: r.DataEngine, Parameters: r.Parameters}
}

// Param returns the parameter key, or "" if it is not set.
func (r Record) Param(key string) string { return r.Parameters[key] }

// NotCleanable reports whether the record carries DataCleanable=False: its
// data must not be purged, whoever asks.
func (r Record) NotCleanable() bool {
	return meta.IsStatusConditionFalse(r.Conditions, ConditionDataCleanable)
}

// Cleanable reports whether the record carries DataCleanable=True, which
// Longhorn's rule requires before its data is purged. A record without
// the condition is neither: it is not purged until a cycle has marked it.
func (r Record) Cleanable() bool {
	return meta.IsStatusConditionTrue(r.Conditions, ConditionDataCleanable)
}

// Scope returns the scope of the record's item.
func (r Record) Scope() Scope { return r.Item().Scope() }

// Clone returns a deep copy, so a Store never shares maps or slices with
// its callers.
func (r Record) Clone() Record {
	r.Parameters = maps.Clone(r.Parameters)
	r.Labels = maps.Clone(r.Labels)
	if r.Conditions != nil {
		cs := make([]metav1.Condition, len(r.Conditions))
		copy(cs, r.Conditions)
		r.Conditions = cs
	}
	return r
}

// Outcome is the judgement of one item.
type Outcome int

// The outcomes. The zero value is OutcomeUndecided, so a verdict nobody set
// neither creates nor forgets a record, and never lets data be purged.
const (
	OutcomeUndecided Outcome = iota // cannot tell this cycle; keep things as they are
	OutcomeOrphan                   // nothing in the cluster owns it
	OutcomeOwned                    // something in the cluster owns it
)

// String returns "undecided", "orphan" or "owned".
func (o Outcome) String() string {
	switch o {
	case OutcomeOrphan:
		return "orphan"
	case OutcomeOwned:
		return "owned"
	case OutcomeUndecided:
		return "undecided"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Verdict is a Judge's answer for one item, with the reason a person can
// read (it ends up in reports, events and conditions).
type Verdict struct {
	Outcome Outcome
	Reason  string
}

// Orphan, Owned and Undecided build verdicts.
func Orphan(reason string) Verdict    { return Verdict{OutcomeOrphan, reason} }
func Owned(reason string) Verdict     { return Verdict{OutcomeOwned, reason} }
func Undecided(reason string) Verdict { return Verdict{OutcomeUndecided, reason} }

// Candidate is an observed item with its verdict.
type Candidate struct {
	Item    Item
	Verdict Verdict
}

// Scope is the part of the cluster a scan covers and a health applies to:
// a node (Disk empty) or one disk of a node, by the disk's name.
type Scope struct {
	NodeID string
	Disk   string
}

// String returns "node" or "node/disk".
func (s Scope) String() string {
	if s.Disk == "" {
		return s.NodeID
	}
	return s.NodeID + "/" + s.Disk
}

// Health is the state of a scope. Except for HealthReady and HealthUnknown,
// the values are reasons for a DataCleanable=False condition, and they
// come in two sorts (see Holds and Forgets), as Longhorn's pending fix for
// longhorn/longhorn#7795 draws the line: an outage (a node down or without
// its manager, a disk whose state cannot be read) keeps the scope's
// records, marked not cleanable; a scope that is gone for good (evicted,
// removed, deleted, replaced by another disk) forgets them. Neither ever
// touches data.
type Health string

// The healths.
const (
	// HealthReady: the scope was scanned completely; what was not seen is gone.
	HealthReady Health = "Ready"
	// HealthUnknown: the scan could not finish this cycle; keep every record
	// as it is, create none, purge none.
	HealthUnknown Health = "Unknown"

	// Healths that hold: the scope's records are kept, marked
	// DataCleanable=False with the health as the reason, and are cleanable
	// again once the scope is Ready.

	// HealthNodeUnavailable: the node is down, its Kubernetes Ready
	// condition is Unknown, or its manager pod is missing.
	HealthNodeUnavailable Health = "NodeUnavailable"
	// HealthDiskInvalid: the disk's state cannot be read or trusted this
	// cycle (its config is missing or corrupt, its replicas directory is
	// no directory, its filesystem is shared with another disk).
	HealthDiskInvalid Health = "DiskInvalid"

	// Healths that forget: the scope's records are dropped, their data
	// kept. So is any other value a host passes.

	// HealthNodeEvicted: eviction is requested for the node.
	HealthNodeEvicted Health = "NodeEvicted"
	// HealthNodeDeleted: the node object is gone from the cluster.
	// caretaker's own reason: Longhorn reports a deleted node as
	// NodeUnavailable, which caretaker reserves for outages.
	HealthNodeDeleted Health = "NodeDeleted"
	// HealthDiskChanged: the disk at the path is another disk (its UUID
	// changed): what lies under the path is not what the records describe.
	HealthDiskChanged Health = "DiskChanged"
	// HealthDiskEvicted: eviction is requested for the disk.
	HealthDiskEvicted Health = "DiskEvicted"
	// HealthDiskRemoved: the disk is no longer part of its node. Decide
	// gives it to a disk a Ready node does not list. caretaker's own
	// reason: Longhorn reports a removed disk as DiskInvalid, which
	// caretaker reserves for a disk it cannot read.
	HealthDiskRemoved Health = "DiskRemoved"
)

// Holds reports whether records in a scope of this health are kept,
// marked not cleanable: HealthNodeUnavailable and HealthDiskInvalid.
func (h Health) Holds() bool { return h == HealthNodeUnavailable || h == HealthDiskInvalid }

// Forgets reports whether records in a scope of this health are forgotten:
// every health but HealthReady, HealthUnknown (or empty) and the ones
// that hold.
func (h Health) Forgets() bool {
	return h != HealthReady && h != HealthUnknown && h != "" && !h.Holds()
}

// ScopeStatus is a scope's health and the reason for it, with the evidence
// an Inventory gathered that the mass-deletion guard (see Guard) weighs.
type ScopeStatus struct {
	Health  Health
	Message string

	// OwnedUnlisted counts the valid items of the scope that the Inventory
	// found owned and left out of Snapshot.Items to save work (diskscan
	// lists only the directories no replica expects). The guard counts
	// them as owned items of the scope. Zero when the Inventory lists
	// every item; a negative count is taken as zero.
	OwnedUnlisted int
	// NoneExpected says the host's list of what may own the scope's items
	// (the replicas expected on a disk) was empty when the scope was
	// scanned. Beside valid items, that is the classic broken view (a
	// replica list read from the wrong namespace), and the guard refuses
	// every purge in the scope.
	NoneExpected bool

	// Groups is the same evidence for each group of the scope's items
	// (one kind and data engine; an empty DataEngine in a key speaks for
	// every data engine of the kind). The guard weighs each group on its
	// own, with its entries here and the two fields above, which speak
	// for every group of the scope. An Inventory that serves several
	// groups in a scope another Inventory also reports (a node) fills
	// Groups; Combine moves each adapter's fields above into Groups for
	// the adapter's kinds and data engines, so evidence never vouches for
	// another adapter's items.
	Groups map[Group]Evidence
}

// Skipped is something an Inventory saw and deliberately did not list as
// an item, with the reason (an invalid name, a corrupt meta file, an empty
// UUID). Hosts log it or turn it into an event; it never becomes a record.
type Skipped struct {
	Scope  Scope
	Name   string
	Reason string
}

// Snapshot is the result of one Inventory scan.
type Snapshot struct {
	// Items are the candidates seen.
	Items []Item
	// Scopes are the scopes this scan covered, with their health. Items of
	// a scope that is not HealthReady must not be trusted to be complete.
	Scopes map[Scope]ScopeStatus
	// Skipped are the entries seen but not listed as items.
	Skipped []Skipped
}
