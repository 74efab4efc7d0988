// Package disktest builds Longhorn-style v1 filesystem disks on a real
// filesystem. It is diskscantest's builders without the conformance suite,
// so that diskscan's own in-package tests can use them (diskscantest
// imports diskscan, which those tests cannot import back).
package disktest

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/caretaker-storage/caretaker/internal/lhreplica/lhreplicatest"
)

// NewDisk creates a disk at path (and its parents): the directory, its
// longhorn-disk.cfg naming name and uuid, and an empty replicas directory.
func NewDisk(path, name, uuid string) error {
	if err := os.MkdirAll(filepath.Join(path, "replicas"), 0o755); err != nil {
		return err
	}
	return WriteConfig(path, name, uuid)
}

// WriteConfig writes (or replaces) the disk's longhorn-disk.cfg.
func WriteConfig(path, name, uuid string) error {
	cfg, err := json.Marshal(map[string]string{"diskName": name, "diskUUID": uuid, "diskDriver": "", "state": "ready"})
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(path, "longhorn-disk.cfg"), cfg)
}

// Meta returns a valid volume.meta for a volume of size bytes, as the v1
// engine writes it.
func Meta(size int64) []byte { return lhreplicatest.EngineMeta(size) }

// Replica describes a replica directory to create.
type Replica struct {
	// Size is the volume's size: the head image's apparent size and the
	// Size in volume.meta. 0 means 1 MiB.
	Size int64
	// Written is how many bytes of data the head image really holds, from
	// offset 0; the rest is a hole. It is rounded up to whole 4 KiB pages
	// by most filesystems.
	Written int64
	// Meta is written as volume.meta; nil means Meta(Size).
	Meta []byte
	// NoMeta leaves volume.meta out.
	NoMeta bool
	// NoImage leaves the head image out (only volume.meta is written): a
	// cheap replica for large benchmarks.
	NoImage bool
}

// MakeReplica creates <disk>/replicas/<name> as r describes.
func MakeReplica(diskPath, name string, r Replica) error {
	dir := filepath.Join(diskPath, "replicas", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if r.Size == 0 {
		r.Size = 1 << 20
	}
	if !r.NoImage {
		if err := sparseFile(filepath.Join(dir, "volume-head-000.img"), r.Size, r.Written); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "volume-head-000.img.meta"),
			[]byte(`{"Name":"volume-head-000.img","Parent":"","Removed":false,"UserCreated":false,"Created":"2026-01-01T00:00:00Z","Labels":null}`), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "revision.counter"), []byte("1"), 0o644); err != nil {
			return err
		}
	}
	if r.NoMeta {
		return nil
	}
	meta := r.Meta
	if meta == nil {
		meta = Meta(r.Size)
	}
	return WriteMeta(dir, meta)
}

// WriteMeta replaces dir's volume.meta the way the engine does: it writes
// volume.meta.tmp and renames it, which also changes the directory's
// modification time.
func WriteMeta(dir string, meta []byte) error {
	return writeAtomic(filepath.Join(dir, "volume.meta"), meta)
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// sparseFile creates a file of apparent size size whose first written
// bytes hold data and the rest is a hole.
func sparseFile(path string, size, written int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if written > 0 {
		buf := make([]byte, 64<<10)
		for i := range buf {
			buf[i] = byte(i*7 + 1)
		}
		for left := min(written, size); left > 0; {
			n := min(left, int64(len(buf)))
			if _, err := f.Write(buf[:n]); err != nil {
				f.Close()
				return err
			}
			left -= n
		}
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
