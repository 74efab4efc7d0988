// Package salvagetest writes Longhorn v1 replica directories in the
// engine's real format, with real sparse files, for tests and
// demonstrations of package salvage: volume.meta in each release's form,
// a .meta per layer, layer images truncated to the volume's size and
// written only where asked, revision.counter as the engine's 4096-byte
// block, and backing images where longhorn-manager puts them.
package salvagetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/caretaker-storage/caretaker/salvage"
)

// BlockSize is the engine's read and write granularity
// (diskutil.VolumeSectorSize).
const BlockSize = 4096

// Write is data written to a layer at an offset.
type Write struct {
	Off  int64
	Data []byte
}

// Block returns a write of one 4096-byte block, block n, filled with b.
func Block(n int64, b byte) Write {
	return Write{Off: n * BlockSize, Data: bytes.Repeat([]byte{b}, BlockSize)}
}

// Layer is one layer image.
type Layer struct {
	// Name is the image's file name; default volume-snap-<n>.img for
	// snapshots (n its index) and volume-head-NNN.img for the head.
	Name        string
	Removed     bool
	UserCreated bool
	Writes      []Write
	// Size is the image's size; 0 means the volume's size.
	Size int64
}

// Replica describes a replica directory.
type Replica struct {
	Size      int64   // the volume's size
	Snapshots []Layer // oldest first
	Head      Layer
	// Counter writes revision.counter holding Revision.
	Counter  bool
	Revision int64
	Dirty    bool
	// Rebuilding, Error, BackingFilePath and Encrypted go to volume.meta
	// as they are (Error and Encrypted only in the forms that have them).
	Rebuilding      bool
	Error           string
	BackingFilePath string
	Encrypted       bool
	// Format is the volume.meta form; default salvage.FormatV111.
	Format salvage.MetaFormat
	// Created is every layer's Created time; default 2024-01-02T03:04:05Z.
	Created time.Time
}

// HeadName is the head's default name: volume-head-NNN.img, NNN the
// number of snapshots (the engine's nextFile numbering).
func (r Replica) HeadName() string {
	if r.Head.Name != "" {
		return r.Head.Name
	}
	return fmt.Sprintf("volume-head-%03d.img", len(r.Snapshots))
}

// LayerNames returns the chain from the head down, as salvage.Chain
// lists it.
func (r Replica) LayerNames() []string {
	names := []string{r.HeadName()}
	for i := len(r.Snapshots) - 1; i >= 0; i-- {
		names = append(names, r.snapName(i))
	}
	return names
}

func (r Replica) snapName(i int) string {
	if n := r.Snapshots[i].Name; n != "" {
		return n
	}
	return fmt.Sprintf("volume-snap-%d.img", i)
}

// WriteReplica creates the replica directory dir (its parent must exist,
// dir must not) and writes r into it.
func WriteReplica(dir string, r Replica) error {
	if r.Size <= 0 {
		return errors.New("salvagetest: Size must be positive")
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	created := r.Created
	if created.IsZero() {
		created = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	}
	parent := ""
	for i, l := range r.Snapshots {
		name := r.snapName(i)
		if err := writeLayer(dir, name, parent, l, r, created); err != nil {
			return err
		}
		parent = name
	}
	if err := writeLayer(dir, r.HeadName(), parent, r.Head, r, created); err != nil {
		return err
	}
	if err := WriteFile(dir, salvage.VolumeMetaFile, VolumeMeta(r, parent)); err != nil {
		return err
	}
	if r.Counter {
		if err := WriteFile(dir, salvage.RevisionCounterFile, RevisionCounter(r.Revision)); err != nil {
			return err
		}
	}
	return nil
}

func writeLayer(dir, name, parent string, l Layer, r Replica, created time.Time) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	size := l.Size
	if size == 0 {
		size = r.Size
	}
	err = f.Truncate(size)
	for _, w := range l.Writes {
		if err == nil {
			_, err = f.WriteAt(w.Data, w.Off)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return WriteFile(dir, name+".meta", LayerMeta(r.Format, name, parent, l, created))
}

// WriteFile writes data as the engine writes its JSON files: to
// <name>.tmp, then renamed (longhorn-engine replica.go encodeToFile).
func WriteFile(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

type kv struct {
	k string
	v any
}

// object marshals keys in order, one document plus a newline, as
// encoding/json writes the engine's structs.
func object(kvs []kv) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range kvs {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(p.k)
		v, _ := json.Marshal(p.v)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// VolumeMeta returns r's volume.meta in r.Format's key order
// (longhorn-engine replica.go type Info), parent being the head's parent.
func VolumeMeta(r Replica, parent string) []byte {
	kvs := []kv{{"Size", r.Size}, {"Head", r.HeadName()}, {"Dirty", r.Dirty}, {"Rebuilding", r.Rebuilding}}
	format := r.Format
	if format == "" {
		format = salvage.FormatV111
	}
	if format == salvage.FormatV110 || format == salvage.FormatV111 || format == salvage.FormatV112 {
		kvs = append(kvs, kv{"Error", r.Error})
	}
	kvs = append(kvs, kv{"Parent", parent}, kv{"SectorSize", int64(512)})
	switch format {
	case salvage.FormatV020, salvage.FormatV110:
		kvs = append(kvs, kv{"BackingFileName", r.BackingFilePath})
	case salvage.FormatV111:
		kvs = append(kvs, kv{"BackingFilePath", r.BackingFilePath})
	case salvage.FormatV112:
		kvs = append(kvs, kv{"BackingFilePath", r.BackingFilePath}, kv{"Encrypted", r.Encrypted})
	}
	return object(kvs)
}

// LayerMeta returns a layer's .meta in format's form (longhorn-engine
// replica.go type disk: Parent only before v0.2.0, Parent and Removed in
// v0.2.0, all keys from v0.3.0).
func LayerMeta(format salvage.MetaFormat, name, parent string, l Layer, created time.Time) []byte {
	switch format {
	case salvage.FormatV010:
		return object([]kv{{"Parent", parent}})
	}
	return object([]kv{{"Name", name}, {"Parent", parent}, {"Removed", l.Removed}, {"UserCreated", l.UserCreated},
		{"Created", created.UTC().Format(time.RFC3339)}, {"Labels", nil}})
}

// RevisionCounter returns revision.counter's block: n in ASCII decimal,
// NUL-padded to 4096 bytes (longhorn-engine revision_counter.go).
func RevisionCounter(n int64) []byte {
	b := make([]byte, BlockSize)
	copy(b, strconv.FormatInt(n, 10))
	return b
}

// WriteBackingImage writes a raw backing image at
// <disk>/backing-images/<dirName>/backing (longhorn-manager types.go
// GetBackingImageDirectoryOnHost) and returns the path volume.meta
// records for it: the instance-manager container's, /host<disk>/....
func WriteBackingImage(disk, dirName string, size int64, writes []Write) (string, error) {
	dir := filepath.Join(disk, "backing-images", dirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	f, err := os.OpenFile(filepath.Join(dir, "backing"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	err = f.Truncate(size)
	for _, w := range writes {
		if err == nil {
			_, err = f.WriteAt(w.Data, w.Off)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(disk)
	if err != nil {
		return "", err
	}
	return "/host" + filepath.ToSlash(abs) + "/backing-images/" + dirName + "/backing", nil
}

// Image returns the volume's image as the engine reads r, computed the
// naive way: a zero buffer of Size bytes with every layer's writes laid
// over it from the oldest snapshot to the head, each cut at the layer's
// size. It holds the whole image in memory: for small test volumes. It
// ignores a backing image.
func (r Replica) Image() []byte {
	img := make([]byte, r.Size)
	for _, l := range append(append([]Layer(nil), r.Snapshots...), r.Head) {
		size := l.Size
		if size == 0 || size > r.Size {
			size = min(r.Size, max(size, r.Size))
		}
		for _, w := range l.Writes {
			if w.Off >= size {
				continue
			}
			copy(img[w.Off:size], w.Data)
		}
	}
	return img
}
