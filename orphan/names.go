package orphan

import (
	"crypto/sha256"
	"strings"
)

// ReplicaDataName returns the record name of a replica data directory,
// as longhorn-manager's types.GetOrphanChecksumNameForOrphanedDataStore
// (types/types.go) spells it: NamePrefix and the hex SHA-256 of the
// fields joined by "-" and trimmed with strings.TrimSpace. It needs no
// kind and cannot fail. For an item whose fields are all non-empty it is
// Item.Name of the KindReplicaData item with those parameters; where a
// field is empty, Item.Name refuses the item (two different items must
// never share a name because one of them lacked a field), while this
// gives the name Longhorn would.
func ReplicaDataName(nodeID, diskName, diskPath, diskUUID, dataName string) string {
	return longhornName(nodeID, diskName, diskPath, diskUUID, dataName)
}

// InstanceName returns the record name of a runtime instance (engine,
// replica, shard or shard group: Longhorn names them all alike), as
// longhorn-manager's types.GetOrphanChecksumNameForOrphanedInstance
// spells it. It needs no kind and cannot fail; for non-empty fields it
// is the Item.Name of the instance item, as ReplicaDataName is for
// replica data.
func InstanceName(instanceName, instanceUUID, instanceManager, dataEngine string) string {
	return longhornName(instanceName, instanceUUID, instanceManager, dataEngine)
}

// longhornName is Longhorn's formula: the fields joined by "-", trimmed of
// surrounding white space, hashed.
func longhornName(fields ...string) string {
	sum := nameSum(sha256.Sum256([]byte(strings.TrimSpace(strings.Join(fields, "-")))))
	return sum.name()
}
