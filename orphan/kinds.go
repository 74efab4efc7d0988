package orphan

import (
	"slices"
	"strconv"
)

// KindSpec is everything the generic core knows about one kind of orphan.
// The table of specs is the only place a kind is spelled out: a new kind
// is one entry in it plus an adapter (see Adapter) that observes, judges
// and deletes its items.
type KindSpec struct {
	// Kind is the kind, spelled as Longhorn's spec.orphanType.
	Kind Kind
	// NameFields are the fields whose values, joined by "-", are hashed
	// into the record name (see Item.Name), in order. FieldNodeID and
	// FieldDataEngine name the Item's own fields; anything else is a
	// parameter key. Every field must be non-empty for an item to be named.
	NameFields []string
	// ScopeParam is the parameter naming the part of a node the kind's
	// items live in (the disk, for replica data), or "" when the node is
	// the whole scope.
	ScopeParam string
	// MatchParam is the parameter naming the data itself (the directory,
	// the instance, the backup). The planner only names an item whose
	// MatchParam a record or an orphan candidate shares: most items of a
	// large scope are owned and never need a name.
	MatchParam string
	// NameClass groups kinds that share a name formula (engine and
	// replica instances): one name seen as two kinds of a class is no
	// item anyone can vouch for, and is undecided.
	NameClass string
	// LabelParams are the labels, beyond Longhorn's fixed ones, that
	// records of the kind carry: label key → parameter key. A parameter
	// that is empty still gives its label, with an empty value, as
	// longhorn-manager's GetOrphanLabelsForOrphanedEngineInstance and
	// its siblings (types/types.go) write it.
	LabelParams map[string]string
	// AutoDeletionItems are the items of Longhorn's
	// orphan-resource-auto-deletion setting that enable automatic
	// deletion of the kind (see ParseAutoDeletion); none for a kind
	// Longhorn's setting does not name.
	AutoDeletionItems []string
	// InstanceExist says records of the kind carry Longhorn's
	// InstanceExist condition: the runtime object is there while its
	// item is seen.
	InstanceExist bool
}

// The NameFields that are not parameters.
const (
	FieldNodeID     = "NodeID"
	FieldDataEngine = "DataEngine"
)

// kindSpecs is the table. Its order is the order of Kinds.
var kindSpecs = []KindSpec{
	{
		Kind:              KindReplicaData,
		NameFields:        []string{FieldNodeID, ParamDiskName, ParamDiskPath, ParamDiskUUID, ParamDataName},
		ScopeParam:        ParamDiskName,
		MatchParam:        ParamDataName,
		NameClass:         "replica-data",
		AutoDeletionItems: []string{"replica-data"},
	},
	instanceSpec(KindEngineInstance),
	instanceSpec(KindReplicaInstance),
	{
		// caretaker's own kind: Longhorn never shipped backup orphans.
		Kind:       KindBackup,
		NameFields: []string{ParamBackupTarget, ParamBackupVolume, ParamBackupName},
		MatchParam: ParamBackupName,
		NameClass:  "backup",
	},
}

// Longhorn's orphan types for the instances of its sharded v2 volumes
// (longhorn-manager k8s/pkg/apis/longhorn/v1beta2/orphan.go), and the
// labels that carry their names (types/types.go,
// GetOrphanLabelsForOrphanedShardInstance and
// GetOrphanLabelsForOrphanedShardGroupInstance). caretaker knows their
// record names (Item.Name, InstanceName) and labels (Item.Labels), and
// the auto-deletion setting item that covers them (AutoDeletionItem), but
// never handles them: they are not in the kind table (Valid is false,
// Spec and Kinds leave them out), so Decide keeps their records as they
// are and never purges or forgets them.
const (
	KindShardInstance      Kind = "shard-instance"
	KindShardGroupInstance Kind = "shardgroup-instance"

	LabelShard      = "longhornshard"      // shard instances: the shard's name
	LabelShardGroup = "longhornshardgroup" // shard group instances: the shard group's name
)

// longhornOnlySpecs are the specs of Longhorn's kinds that caretaker names
// and labels but does not handle (see KindShardInstance).
var longhornOnlySpecs = []KindSpec{
	instanceSpec(KindShardInstance),
	instanceSpec(KindShardGroupInstance),
}

// nameSpecOf finds k's spec for naming and labelling: the kind table's,
// or that of a Longhorn kind caretaker does not handle.
func nameSpecOf(k Kind) *KindSpec {
	if s := specOf(k); s != nil {
		return s
	}
	for i := range longhornOnlySpecs {
		if longhornOnlySpecs[i].Kind == k {
			return &longhornOnlySpecs[i]
		}
	}
	return nil
}

// instanceSpec is the spec of a runtime instance kind: engines, replicas,
// shards and shard groups share Longhorn's name formula and setting item.
// Their labels are those longhorn-manager's Orphan mutating webhook sets
// (webhook/resources/orphan/mutator.go, through
// types.GetOrphanLabelsForOrphanedEngineInstance and its siblings for
// replicas, shards and shard groups): the instance manager, and the
// instance's name under longhornengine, longhornreplica, longhornshard or
// longhornshardgroup.
func instanceSpec(k Kind) KindSpec {
	own := map[Kind]string{KindEngineInstance: LabelEngine, KindReplicaInstance: LabelReplica,
		KindShardInstance: LabelShard, KindShardGroupInstance: LabelShardGroup}[k]
	return KindSpec{
		Kind:              k,
		NameFields:        []string{ParamInstanceName, ParamInstanceUUID, ParamInstanceManager, FieldDataEngine},
		MatchParam:        ParamInstanceName,
		NameClass:         "instance",
		LabelParams:       map[string]string{LabelInstanceManager: ParamInstanceManager, own: ParamInstanceName},
		AutoDeletionItems: []string{"instance"},
		InstanceExist:     true,
	}
}

// Spec returns the spec of kind k, and false for a kind the table does
// not hold. The spec's slices and map are shared: do not modify them.
func Spec(k Kind) (KindSpec, bool) {
	if s := specOf(k); s != nil {
		return *s, true
	}
	return KindSpec{}, false
}

// specOf finds k's entry; the table is short, and a linear scan of it is
// faster than hashing the kind.
func specOf(k Kind) *KindSpec {
	for i := range kindSpecs {
		if kindSpecs[i].Kind == k {
			return &kindSpecs[i]
		}
	}
	return nil
}

// Kinds lists every kind the table holds, in a stable order.
func Kinds() []Kind {
	out := make([]Kind, len(kindSpecs))
	for i, s := range kindSpecs {
		out[i] = s.Kind
	}
	return out
}

// Valid reports whether k is in the table. A record of a kind that is
// not (Longhorn's Orphan CRD also holds shard-instance and
// shardgroup-instance, for its sharded v2 volumes, and may gain more) is
// left alone: Decide keeps it as it is, with a reason naming the kind,
// sets none of its conditions and never purges or forgets it, whatever
// the policy, the scope or a deletion request says; the Stores hold and
// list it like any other. Its owner (longhorn-manager) handles it.
func (k Kind) Valid() bool { return specOf(k) != nil }

// unknownKindReason is why a record of a kind the table does not hold is
// kept.
func unknownKindReason(k Kind) string {
	return "orphan type " + strconv.Quote(string(k)) + " is not one caretaker handles: left to its owner"
}

// field returns the value of one of a spec's NameFields for it.
func (it Item) field(name string) string {
	switch name {
	case FieldNodeID:
		return it.NodeID
	case FieldDataEngine:
		return string(it.DataEngine)
	}
	return it.Param(name)
}

// autoDeletionItems lists every item the auto-deletion settings accept,
// for error messages.
func autoDeletionItems() []string {
	var out []string
	for _, s := range kindSpecs {
		for _, item := range s.AutoDeletionItems {
			if !slices.Contains(out, item) {
				out = append(out, item)
			}
		}
	}
	return out
}

// kindsForItem returns the kinds a setting item enables.
func kindsForItem(item string) []Kind {
	var out []Kind
	for _, s := range kindSpecs {
		if slices.Contains(s.AutoDeletionItems, item) {
			out = append(out, s.Kind)
		}
	}
	return out
}

// matchKey is a cheap stand-in for a record name, built from the kind's
// MatchParam trimmed at least as much as the name trims it: two
// observations of the same data share a key, so an item whose key is not
// needed is not the item of any record or orphan candidate. (Longhorn's
// dash-joined names can collide for different items, e.g. disk UUID "a-b"
// with data "c" and "a" with "b-c"; such collisions are not merged here,
// which only ever keeps two different directories apart.)
type matchKey struct {
	class   string // the kind's NameClass; unknown kinds have their own
	primary string
}
