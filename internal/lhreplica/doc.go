// Package lhreplica is the one reading of a Longhorn v1 replica directory's
// format that caretaker's packages share: the data-directory name rule and
// the volume a name belongs to, volume.meta and layer .meta parsing, and
// the revision counter. Every parse error is a *MetaError (naming the file
// and what was wrong) wrapping ErrCorrupt.
//
// It says what the format is, not what a caller does with it: diskscan
// (is this directory a replica the scan may report?) and salvage (can the
// volume's data be recovered from it?) put their own policies on top and
// state them in their docs. The format itself is read strictly: where the
// engine's own decoder (encoding/json into longhorn-engine
// pkg/replica/replica.go, type Info) would read a file one way and a
// careful reader another (a duplicated key, a key that matches a field
// only without regard to case, both backing-file keys, a Head that is a
// path), the file is corrupt. A corrupt file is never a replica to the
// scan, so the stricter reading keeps the directory's data.
//
// Sources: longhorn-engine pkg/replica/replica.go (Info, disk, construct,
// readMetadata, encodeToFile), pkg/replica/revision_counter.go
// (readRevisionCounter), pkg/util/disk/constant.go (file names), and
// longhorn-manager scheduler/replica_scheduler.go (the directory name:
// the volume, a dash and util.RandomID's 8 characters).
package lhreplica
