package diskscantest

import "github.com/caretaker-storage/caretaker/diskscan/internal/disktest"

// NewDisk creates a disk at path (and its parents): the directory, its
// longhorn-disk.cfg naming name and uuid, and an empty replicas directory.
func NewDisk(path, name, uuid string) error { return disktest.NewDisk(path, name, uuid) }

// WriteConfig writes (or replaces) the disk's longhorn-disk.cfg.
func WriteConfig(path, name, uuid string) error { return disktest.WriteConfig(path, name, uuid) }

// Meta returns a valid volume.meta for a volume of size bytes, as the v1
// engine writes it.
func Meta(size int64) []byte { return disktest.Meta(size) }

// Replica describes a replica directory to create. Its fields:
//
//	Size    int64  // the volume's size: the head image's apparent size and the Size in volume.meta; 0 means 1 MiB
//	Written int64  // bytes of data the head image really holds, from offset 0; the rest is a hole
//	Meta    []byte // written as volume.meta; nil means Meta(Size)
//	NoMeta  bool   // leave volume.meta out
//	NoImage bool   // leave the head image out (only volume.meta is written): a cheap replica for large benchmarks
//
// It is defined in an internal package so that diskscan's in-package
// tests, which cannot import diskscantest (it imports diskscan), build
// disks the same way.
type Replica = disktest.Replica

// MakeReplica creates <disk>/replicas/<name> as r describes.
func MakeReplica(diskPath, name string, r Replica) error {
	return disktest.MakeReplica(diskPath, name, r)
}

// WriteMeta replaces dir's volume.meta the way the engine does: it writes
// volume.meta.tmp and renames it, which also changes the directory's
// modification time.
func WriteMeta(dir string, meta []byte) error { return disktest.WriteMeta(dir, meta) }
