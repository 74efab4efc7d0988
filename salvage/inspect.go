package salvage

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/caretaker-storage/caretaker/internal/bounded"
	"github.com/caretaker-storage/caretaker/internal/safefile"
	"github.com/caretaker-storage/caretaker/orphan"
)

// Default limits. Real meta files are a few hundred bytes; the limits
// only stop a corrupt or hostile directory from costing memory or time.
const (
	// DefaultMaxMetaSize bounds every meta file read.
	DefaultMaxMetaSize = 64 << 10
	// DefaultMaxChainLength is the engine's own limit on a live chain
	// (longhorn-engine pkg/replica/replica.go openLiveChain,
	// types.MaximumTotalSnapshotCount = 250).
	DefaultMaxChainLength = 250
	// DefaultMaxEntries bounds the directory entries listed.
	DefaultMaxEntries = 1 << 16
	// maxOffChainChecked bounds the .meta files outside the chain that
	// are read, each within MaxMetaSize.
	maxOffChainChecked = 256
)

// Options tunes Inspect. The zero value means the defaults.
type Options struct {
	// MaxMetaSize bounds each meta file (DefaultMaxMetaSize if <= 0).
	MaxMetaSize int64
	// MaxChainLength bounds the chain (DefaultMaxChainLength if <= 0).
	MaxChainLength int
	// MaxEntries bounds the directory entries listed to find snapshots
	// outside the chain (DefaultMaxEntries if <= 0).
	MaxEntries int
	// DiskPath is the disk holding the replica directory, where a backing
	// image is looked for. Default: two levels above the directory, when
	// the directory's parent is named "replicas".
	DiskPath string
	// BackingFile, if set, is the backing image file to use instead of
	// the one under the copy's own disk (which Longhorn's backing image
	// manager may have removed from that disk while the image lives on
	// elsewhere). It is checked against what the files tell of the image
	// the copy expects (see BackingImage.Checked); a mismatch is
	// ReasonBackingImageMismatch. Where a backing.cfg records a checksum,
	// each inspection reads the whole file for its SHA-512, so Recover,
	// which inspects again before it exports, reads it once more.
	BackingFile string
}

// Layer is one layer of a replica's chain: the head or a snapshot.
type Layer struct {
	Name        string // the image's file name, e.g. volume-head-002.img
	Parent      string // the parent's image file name, "" for the base
	Removed     bool   // a deleted snapshot not merged yet: read through
	UserCreated bool
	Created     time.Time // from the .meta (v0.3.0+); zero if absent
	Labels      map[string]string
	Present     bool      // the image exists as a regular file
	Size        int64     // apparent size of the image
	Allocated   int64     // bytes allocated on disk
	ModTime     time.Time // the image's modification time

	info fs.FileInfo // what lstat said, for the export's identity check
}

// BackingImage is the backing image a volume.meta names.
type BackingImage struct {
	// Recorded is the path in volume.meta: the instance-manager
	// container's view, /host/<disk>/backing-images/<name>-<uuid>/backing.
	Recorded string
	// Path is where it was looked for under the replica's own disk ("" if
	// the recorded path has no backing-images/<dir>/<file> suffix).
	Path      string
	Present   bool
	Size      int64
	Allocated int64
	// Format is "raw" or "qcow2", once the file was read ("" before).
	Format string
	// VirtualSize is the size of the disk image the file holds: Size for
	// a raw file, the header's virtual size for a qcow2 one.
	VirtualSize int64
	// Given says the file is the one Options.BackingFile named, not the
	// one under the copy's disk.
	Given bool
	// Checked says, one line each, what the file was checked against
	// and how it came out, e.g. "virtual size 4194304 fits the volume's
	// 8388608 bytes" or "SHA-512 matches backing.cfg's currentChecksum".
	Checked []string
	info    fs.FileInfo // the opened file's, for the export's identity check
}

// Inspection is what Inspect found in one replica directory, and its
// verdict.
type Inspection struct {
	Dir    string // the directory as given
	Volume string // the volume's name from the directory's name
	Meta   VolumeMeta
	// MetaRead says volume.meta was read and parsed; Meta is zero
	// otherwise.
	MetaRead bool
	// Layers is the chain from the head down, as far as it could be
	// followed.
	Layers []Layer
	// OffChain are snapshot images with a .meta that are not in the chain
	// (an abandoned branch after a revert): never read.
	OffChain []string
	// Backing is the backing image, nil if volume.meta names none.
	Backing *BackingImage
	// Revision is the revision counter when HasRevision.
	Revision    int64
	HasRevision bool
	// Apparent and Allocated sum the chain's image files.
	Apparent, Allocated int64
	// HeadModTime and HeadAllocated are the head image's, as the engine's
	// salvage rule reads them; zero if the head is missing.
	HeadModTime   time.Time
	HeadAllocated int64
	// MetaModTime is volume.meta's modification time.
	MetaModTime time.Time
	// Recoverable says the volume's data can be read back from this
	// directory exactly as the engine reads it: Reasons is empty.
	Recoverable bool
	Reasons     []Reason
	// NoData says the directory is proven to hold none of the volume's
	// data: volume.meta was read and names no backing image, and no file
	// of the directory other than its metadata (volume.meta, .meta,
	// .checksum, revision.counter and their .tmp) holds data: each is
	// empty, or has no block allocated and lseek(SEEK_DATA) finds no data
	// in it. Anything that cannot be examined (a missing or damaged
	// volume.meta, a link, a subdirectory, a listing cut at MaxEntries, a
	// platform without SEEK_DATA) leaves it false. It is independent of
	// Recoverable: a copy the export cannot read today (a backing image
	// missing or qcow2, a lost volume.meta, a broken chain) still holds
	// the volume's data, and only NoData takes a copy out of the orphan
	// package's last-copy guard (orphan.Copy.NoData).
	NoData bool
	// Notes are facts worth knowing that do not prevent recovery (dirty,
	// encrypted, a counter that does not parse, ...).
	Notes []string
}

// Encrypted says the image is LUKS2 ciphertext (volume.meta Encrypted,
// Longhorn v1.12+). Such a copy is recoverable: its export is the
// ciphertext, which opens with the volume's key (cryptsetup open).
func (in *Inspection) Encrypted() bool { return in.Meta.Encrypted }

// ReasonStrings returns the reasons as text.
func (in *Inspection) ReasonStrings() []string {
	out := make([]string, len(in.Reasons))
	for i, r := range in.Reasons {
		out[i] = r.String()
	}
	return out
}

// Has reports whether the inspection has a reason of kind k.
func (in *Inspection) Has(k ReasonKind) bool {
	return slices.ContainsFunc(in.Reasons, func(r Reason) bool { return r.Kind == k })
}

// Chain returns what an export reads: the volume's size, the chain's
// image names from the head down and the backing image's path. It is
// meaningful only for a recoverable inspection. The Chain remembers each
// file Inspect saw (device, inode, size and modification time): an
// export of it refuses a layer or backing file replaced or changed since
// (ErrExportChanged), so what was checked is what is read.
func (in *Inspection) Chain() Chain {
	c := Chain{Size: in.Meta.Size, Layers: make([]string, len(in.Layers)), inspected: map[string]fs.FileInfo{}}
	for i, l := range in.Layers {
		c.Layers[i] = l.Name
		if l.info != nil {
			c.inspected[l.Name] = l.info
		}
	}
	if in.Backing != nil {
		c.BackingFile = in.Backing.Path
		if in.Backing.info != nil {
			c.inspected[in.Backing.Path] = in.Backing.info
		}
	}
	return c
}

// VolumeOf returns the volume name in a replica directory's name, or the
// name itself when it is not Longhorn's <volume>-<8 letters or digits>:
// volume.meta does not name the volume. This is Inspection.Volume's rule.
//
// Deprecated: read Inspection.Volume; orphan.VolumeOfDataName is the
// data-directory name rule itself ("" for a name not of that form).
func VolumeOf(dirName string) string { return volumeOfDir(dirName) }

// volumeOfDir is Inspection.Volume's naming policy, for a rescue tool:
// the volume by Longhorn's data-directory name rule, or else the
// directory's own name, so that copies with names not of that form are
// never ranked together (Rank) as one volume's. The last-copy guard does
// not use it: CopyInventory gives the guard the rule's answer ("" when
// the name is not of the form, so the volume is unknown).
func volumeOfDir(dirName string) string {
	if v := orphan.VolumeOfDataName(dirName); v != "" {
		return v
	}
	return dirName
}

// Inspect reads one Longhorn v1 replica directory and judges whether the
// volume's data can be recovered from it. It never writes, never follows
// a symbolic link (the directory itself included), never opens a FIFO,
// socket or device, reads every meta file with a bound and checks ctx
// between files.
//
// What is wrong with the directory's contents is a Reason in the
// Inspection, not an error. The error is ctx's, or one reaching the
// directory itself (it does not exist: fs.ErrNotExist; permission).
func Inspect(ctx context.Context, replicaDir string, opts Options) (*Inspection, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	in := &Inspection{Dir: replicaDir, Volume: volumeOfDir(filepath.Base(filepath.Clean(replicaDir)))}
	defer func() { in.Recoverable = len(in.Reasons) == 0 }()
	// Cleaned first: a trailing slash would make lstat follow a link.
	root, err := openDir(filepath.Clean(replicaDir))
	if err != nil {
		var te *safefile.TypeError
		if errors.As(err, &te) {
			in.reason(ReasonNotDirectory, "", "%s", te.Error())
			return in, nil
		}
		return nil, err
	}
	defer root.Close()
	ins := inspector{ctx: ctx, root: root, in: in, opts: opts}
	if err := ins.run(); err != nil {
		return nil, err
	}
	return in, nil
}

// openDir opens dir as an os.Root if it is a directory, not a symbolic
// link, and the directory opened is the one lstat saw.
func openDir(dir string) (*os.Root, error) {
	before, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if !before.IsDir() {
		return nil, &safefile.TypeError{Name: dir, Mode: before.Mode()}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	after, err := root.Stat(".")
	if err != nil {
		root.Close()
		return nil, err
	}
	if !os.SameFile(before, after) {
		root.Close()
		return nil, &safefile.TypeError{Name: dir, Mode: after.Mode(), Swapped: true}
	}
	return root, nil
}

type inspector struct {
	ctx  context.Context
	root *os.Root
	in   *Inspection
	opts Options
	// names are the directory's entries, as offChain listed them;
	// listedAll says the listing reached the end.
	names     []string
	listedAll bool
}

func (in *Inspection) reason(k ReasonKind, file, format string, args ...any) {
	in.Reasons = append(in.Reasons, Reason{Kind: k, File: file, Detail: fmt.Sprintf(format, args...)})
}

func (in *Inspection) note(format string, args ...any) {
	in.Notes = append(in.Notes, fmt.Sprintf(format, args...))
}

func (s *inspector) run() error {
	in := s.in
	data, info, err := s.readMeta(VolumeMetaFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		in.reason(ReasonVolumeMeta, VolumeMetaFile, "missing")
	case err != nil:
		if !classified(err) {
			return err
		}
		in.reason(ReasonVolumeMeta, VolumeMetaFile, "%s", describe(err))
	default:
		in.MetaModTime = info.ModTime()
		m, err := ParseVolumeMeta(data)
		if err != nil {
			in.reason(ReasonVolumeMeta, VolumeMetaFile, "%s", detail(err))
		} else {
			in.Meta, in.MetaRead = m, true
		}
	}
	if in.MetaRead {
		m := in.Meta
		if m.Error != "" {
			in.reason(ReasonErrorState, VolumeMetaFile, "%s", truncate(m.Error, 200))
		}
		if m.Rebuilding {
			in.reason(ReasonRebuilding, VolumeMetaFile, "a rebuild into this replica did not finish")
		}
		if m.Dirty {
			in.note("dirty: the replica was not closed cleanly (normal for a crashed node)")
		}
		s.size()
		if m.Encrypted {
			in.note("encrypted: the image is LUKS2 ciphertext; open the export with the volume's key")
		}
		if err := s.chain(); err != nil {
			return err
		}
		if m.BackingFilePath != "" {
			s.backing()
		}
	}
	if err := s.revision(); err != nil {
		return err
	}
	if err := s.offChain(); err != nil {
		return err
	}
	s.interrupted()
	if in.MetaRead {
		if err := s.journal(); err != nil {
			return err
		}
	}
	return s.noData()
}

// classified reports whether err is about the file's contents or type
// (a reason), not an I/O failure of the directory (an error).
func classified(err error) bool {
	return errors.Is(err, safefile.ErrNotRegular) || errors.Is(err, bounded.ErrTooLarge) || errors.Is(err, fs.ErrNotExist)
}

// readMeta reads a regular file of the directory, with the bound.
func (s *inspector) readMeta(name string) ([]byte, fs.FileInfo, error) {
	return readBounded(s.root, name, orDefault(s.opts.MaxMetaSize, DefaultMaxMetaSize))
}

func readBounded(root safefile.Opener, name string, limit int64) ([]byte, fs.FileInfo, error) {
	f, info, err := safefile.OpenRegular(root, name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, err := bounded.ReadAll(f, limit, name)
	if err != nil {
		return nil, nil, err
	}
	return data, info, nil
}

// chain follows the head's Parent links as the engine's Chain() does
// (longhorn-engine pkg/replica/replica.go Chain: from Info.Head, each
// entry's Parent until ""), but stops at a cycle, at the engine's length
// limit, and at a .meta it cannot read.
func (s *inspector) chain() error {
	in := s.in
	limit := s.opts.MaxChainLength
	if limit <= 0 {
		limit = DefaultMaxChainLength
	}
	seen := map[string]bool{}
	for cur := in.Meta.Head; cur != ""; {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		if seen[cur] {
			in.reason(ReasonCyclicChain, cur+layerMetaSuffix, "its chain comes back to %s", cur)
			break
		}
		if len(in.Layers) >= limit {
			in.reason(ReasonChainTooLong, "", "more than %d layers", limit)
			break
		}
		seen[cur] = true
		metaName := cur + layerMetaSuffix
		data, _, err := s.readMeta(metaName)
		if err != nil {
			switch {
			case errors.Is(err, fs.ErrNotExist):
				in.reason(ReasonBrokenChain, metaName, "missing: the chain cannot be followed past %s", cur)
			case errors.Is(err, safefile.ErrNotRegular):
				in.reason(ReasonNotRegular, metaName, "%s", describe(err))
			case errors.Is(err, bounded.ErrTooLarge):
				in.reason(ReasonLayerMeta, metaName, "%s", describe(err))
			default:
				return err
			}
			break
		}
		lm, err := ParseLayerMeta(metaName, data)
		if err != nil {
			in.reason(ReasonLayerMeta, metaName, "%s", detail(err))
			break
		}
		l := Layer{Name: cur, Parent: lm.Parent, Removed: lm.Removed, UserCreated: lm.UserCreated, Created: lm.CreatedTime(), Labels: lm.Labels}
		if err := s.image(&l); err != nil {
			return err
		}
		in.Layers = append(in.Layers, l)
		cur = lm.Parent
	}
	if len(in.Layers) > 0 {
		head := in.Layers[0]
		if head.Present {
			in.HeadModTime, in.HeadAllocated = head.ModTime, head.Allocated
			if head.Size < in.Meta.Size {
				in.reason(ReasonShortHead, head.Name, "%d bytes, the volume has %d: the engine would read older data past its end", head.Size, in.Meta.Size)
			}
		}
		if in.Layers[0].Parent != in.Meta.Parent {
			in.note("volume.meta Parent %q differs from the head's %q; the head's is followed, as the engine does", in.Meta.Parent, in.Layers[0].Parent)
		}
	}
	for _, l := range in.Layers {
		if l.Present && l.Size > in.Meta.Size {
			in.note("%s is %d bytes, longer than the volume (%d): the bytes past the volume's size are not part of it", l.Name, l.Size, in.Meta.Size)
		}
	}
	return nil
}

// image lstat's a layer's image file: it is never opened.
func (s *inspector) image(l *Layer) error {
	fi, err := s.root.Lstat(l.Name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.in.reason(ReasonMissingLayer, l.Name, "its .meta exists but the image does not (the engine would create it empty and read older data through it)")
		return nil
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		s.in.reason(ReasonNotRegular, l.Name, "%s, not a regular file", safefile.Describe(fi.Mode()))
		return nil
	}
	l.Present, l.Size, l.Allocated, l.ModTime, l.info = true, fi.Size(), allocated(fi), fi.ModTime(), fi
	s.in.Apparent += l.Size
	s.in.Allocated += l.Allocated
	return nil
}

// backing resolves the backing image under the replica's own disk: only
// the backing-images/<name>-<uuid>/backing suffix of the recorded path is
// reliable (longhorn-manager types/types.go
// GetBackingImagePathForReplicaManagerContainer prefixes the container's
// /host). Each component is lstat'ed: no link is followed.
func (s *inspector) backing() {
	in := s.in
	b := &BackingImage{Recorded: in.Meta.BackingFilePath}
	in.Backing = b
	parts := strings.Split(filepath.ToSlash(filepath.Clean(b.Recorded)), "/")
	i := slices.Index(parts, "backing-images")
	if i < 0 || len(parts)-i != 3 || !plainName(parts[i+1]) || !plainName(parts[i+2]) {
		in.reason(ReasonMissingBackingImage, VolumeMetaFile, "cannot place %q under a disk's backing-images/<name>-<uuid>/<file>", b.Recorded)
		return
	}
	disk := s.opts.DiskPath
	if disk == "" {
		parent := filepath.Dir(filepath.Clean(in.Dir))
		if filepath.Base(parent) != "replicas" {
			in.reason(ReasonMissingBackingImage, "", "the directory is not under <disk>/replicas; set the disk path to find %s", strings.Join(parts[i:], "/"))
			return
		}
		disk = filepath.Dir(parent)
	}
	rel := strings.Join(parts[i:], "/")
	if s.opts.BackingFile != "" {
		s.givenBacking(b, parts[i+1])
		return
	}
	b.Path = filepath.Join(disk, filepath.FromSlash(rel))
	root, err := openDir(disk)
	if err != nil {
		in.reason(ReasonMissingBackingImage, "", "disk %s: %v", disk, err)
		return
	}
	defer root.Close()
	for _, dir := range []string{parts[i], parts[i] + "/" + parts[i+1]} {
		fi, err := root.Lstat(dir)
		if err != nil || !fi.IsDir() {
			what := "missing"
			if err == nil {
				what = safefile.Describe(fi.Mode()) + ", not a directory"
			}
			in.reason(ReasonMissingBackingImage, "", "%s: %s", filepath.Join(disk, dir), what)
			return
		}
	}
	f, fi, err := safefile.OpenRegular(root, rel)
	if err != nil {
		in.reason(ReasonMissingBackingImage, "", "%s: %s", b.Path, describe(err))
		return
	}
	defer f.Close()
	s.readBacking(b, f, fi)
}

// readBacking fills b from the open backing file f: presence, sizes and
// format. It says false when the file cannot be used.
func (s *inspector) readBacking(b *BackingImage, f *os.File, fi fs.FileInfo) bool {
	in := s.in
	b.Present, b.Size, b.Allocated, b.info = true, fi.Size(), allocated(fi), fi
	b.Format, b.VirtualSize = "raw", b.Size
	isQ, err := isQcow2(f)
	if err != nil {
		in.reason(ReasonMissingBackingImage, "", "%s: %s", b.Path, describe(err))
		return false
	}
	if isQ {
		b.Format = "qcow2"
		q, err := openQcow2(f, fi.Size(), b.Path)
		if err != nil {
			in.reason(ReasonBackingImageFormat, "", "%v", err)
			return false
		}
		b.VirtualSize = q.info.VirtualSize
	}
	return true
}

// givenBacking uses Options.BackingFile for the backing image the copy
// expects in backing-images/<dirName>/, checking it as far as the files
// allow: its virtual size must fit the volume, and where a backing.cfg
// (Longhorn's backing image manager's record, written beside the file:
// backing-image-manager pkg/util BackingImageConfig) lies beside the
// given file, its name and UUID must be the expected directory's, its
// size the file's, and its checksum (SHA-512) the file's.
func (s *inspector) givenBacking(b *BackingImage, dirName string) {
	in := s.in
	b.Given = true
	b.Path = s.opts.BackingFile
	root, err := openDir(filepath.Dir(b.Path))
	if err != nil {
		in.reason(ReasonMissingBackingImage, "", "given backing file %s: %s", b.Path, describe(err))
		return
	}
	defer root.Close()
	f, fi, err := safefile.OpenRegular(root, filepath.Base(b.Path))
	if err != nil {
		in.reason(ReasonMissingBackingImage, "", "given backing file %s: %s", b.Path, describe(err))
		return
	}
	defer f.Close()
	if !s.readBacking(b, f, fi) {
		return
	}
	mismatch := func(format string, args ...any) {
		in.reason(ReasonBackingImageMismatch, "", "given backing file %s: "+format, append([]any{b.Path}, args...)...)
	}
	if in.MetaRead && b.VirtualSize > in.Meta.Size {
		mismatch("its virtual size %d is larger than the volume's %d bytes", b.VirtualSize, in.Meta.Size)
		return
	}
	if in.MetaRead {
		b.Checked = append(b.Checked, fmt.Sprintf("virtual size %d fits the volume's %d bytes", b.VirtualSize, in.Meta.Size))
	}
	data, _, err := readBounded(root, backingConfigFile, orDefault(s.opts.MaxMetaSize, DefaultMaxMetaSize))
	if errors.Is(err, fs.ErrNotExist) {
		b.Checked = append(b.Checked, "no "+backingConfigFile+" beside it: its name, size and checksum could not be checked")
		return
	}
	if err != nil {
		mismatch("%s beside it cannot be read: %s", backingConfigFile, describe(err))
		return
	}
	var cfg struct {
		Name             string `json:"name"`
		UUID             string `json:"uuid"`
		Size             int64  `json:"size"`
		ExpectedChecksum string `json:"expectedChecksum"`
		CurrentChecksum  string `json:"currentChecksum"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		mismatch("%s beside it is not JSON: %v", backingConfigFile, err)
		return
	}
	if want := cfg.Name + "-" + cfg.UUID; cfg.Name != "" && want != dirName {
		mismatch("%s names backing image %s, the copy expects %s", backingConfigFile, want, dirName)
		return
	}
	if cfg.Name != "" {
		b.Checked = append(b.Checked, fmt.Sprintf("%s names %s, as the copy expects", backingConfigFile, dirName))
	}
	if cfg.Size != 0 && cfg.Size != b.Size {
		mismatch("it has %d bytes, %s says %d", b.Size, backingConfigFile, cfg.Size)
		return
	}
	if cfg.Size != 0 {
		b.Checked = append(b.Checked, fmt.Sprintf("size %d as %s says", b.Size, backingConfigFile))
	}
	want, which := cfg.CurrentChecksum, "currentChecksum"
	if want == "" {
		want, which = cfg.ExpectedChecksum, "expectedChecksum"
	}
	if want == "" {
		b.Checked = append(b.Checked, backingConfigFile+" records no checksum")
		return
	}
	h := sha512.New()
	if _, err := io.Copy(h, readerWithContext{s.ctx, f}); err != nil {
		mismatch("reading it for its checksum: %v", err)
		return
	}
	if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, want) {
		mismatch("its SHA-512 is %s, %s's %s is %s", got, backingConfigFile, which, want)
		return
	}
	b.Checked = append(b.Checked, "SHA-512 matches "+backingConfigFile+"'s "+which)
}

// backingConfigFile is the backing image manager's record beside a
// backing image file.
const backingConfigFile = "backing.cfg"

// readerWithContext stops reading at ctx's end.
type readerWithContext struct {
	ctx context.Context
	r   io.Reader
}

func (r readerWithContext) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// revision reads revision.counter. A missing file means the counter is
// disabled (the default since Longhorn v1.7); an unreadable one is a note:
// the data does not depend on it.
func (s *inspector) revision() error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	data, _, err := readBounded(s.root, RevisionCounterFile, revisionCounterSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		if !classified(err) {
			return err
		}
		s.in.note("revision.counter not used: %s", describe(err))
		return nil
	}
	n, err := ParseRevisionCounter(data)
	if err != nil {
		s.in.note("revision.counter not used: %v", err)
		return nil
	}
	s.in.Revision, s.in.HasRevision = n, true
	return nil
}

// offChain lists the layer .meta files outside the chain. The engine lists
// them too (readMetadata) but never reads them.
func (s *inspector) offChain() error {
	d, err := s.root.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	inChain := map[string]bool{}
	for _, l := range s.in.Layers {
		inChain[l.Name] = true
	}
	limit := s.opts.MaxEntries
	if limit <= 0 {
		limit = DefaultMaxEntries
	}
	for n := 0; ; {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		names, err := d.Readdirnames(256)
		s.names = append(s.names, names...)
		for _, name := range names {
			img, ok := strings.CutSuffix(name, layerMetaSuffix)
			if ok && name != VolumeMetaFile && !inChain[img] && strings.HasSuffix(img, ".img") {
				s.in.OffChain = append(s.in.OffChain, img)
			}
		}
		n += len(names)
		if err == io.EOF || len(names) == 0 {
			s.listedAll = err == io.EOF && n <= limit
			break
		}
		if err != nil {
			return err
		}
		if n >= limit {
			s.in.note("more than %d directory entries: the listing of snapshots outside the chain stopped there", limit)
			break
		}
	}
	slices.Sort(s.in.OffChain)
	if len(s.in.OffChain) > 0 {
		s.in.note("%d snapshot(s) outside the head's chain, never read: %s", len(s.in.OffChain), strings.Join(s.in.OffChain, ", "))
	}
	// The engine's open reads every .meta of the directory and fails on
	// one that does not parse (readMetadata), in the chain or not. Such a
	// file outside the chain does not change the data, so it is a note:
	// the engine itself could not open this copy as it is.
	for i, img := range s.in.OffChain {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		if i == maxOffChainChecked {
			s.in.note("only the first %d .meta files outside the chain were checked", maxOffChainChecked)
			break
		}
		name := img + layerMetaSuffix
		data, _, err := s.readMeta(name)
		if err == nil {
			_, err = ParseLayerMeta(name, data)
		} else if !classified(err) {
			return err
		}
		if err != nil {
			s.in.note("%s (outside the chain): %s; the engine's own open would fail on it", name, describe(err))
		}
	}
	return nil
}

func orDefault(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

// detail is a parse error's text without the file name a Reason names.
func detail(err error) string {
	var me *MetaError
	if errors.As(err, &me) {
		return me.Detail
	}
	return err.Error()
}

// describe says what was wrong with a file without repeating its name.
func describe(err error) string {
	var te *safefile.TypeError
	var tl *bounded.TooLargeError
	switch {
	case errors.As(err, &te) && te.Swapped:
		return "replaced by another file while being opened"
	case errors.As(err, &te):
		return safefile.Describe(te.Mode) + ", not a regular file"
	case errors.As(err, &tl):
		return fmt.Sprintf("larger than %d bytes", tl.Limit)
	case errors.Is(err, fs.ErrNotExist):
		return "missing"
	}
	return detail(err)
}

// ReuseHint is what a host needs to re-adopt a recoverable copy as a
// failed replica of its volume instead of rebuilding one from scratch
// (longhorn/longhorn#10726). caretaker itself never re-adopts a copy.
type ReuseHint struct {
	DataDirectoryName string // the directory's name under <disk>/replicas (replica spec.dataDirectoryName)
	DiskPath          string // the disk holding it: the parent of replicas/
	Head              string // the head image's name
	Size              int64  // the volume's size the copy holds
	Revision          int64  // the revision counter, when HasRevision
	HasRevision       bool
}

// ReuseHint returns the hint for a recoverable copy under
// <disk>/replicas; false for a copy that is not recoverable or not there.
func (in *Inspection) ReuseHint() (ReuseHint, bool) {
	dir := filepath.Clean(in.Dir)
	parent := filepath.Dir(dir)
	if !in.Recoverable || filepath.Base(parent) != "replicas" {
		return ReuseHint{}, false
	}
	return ReuseHint{DataDirectoryName: filepath.Base(dir), DiskPath: filepath.Dir(parent), Head: in.Meta.Head,
		Size: in.Meta.Size, Revision: in.Revision, HasRevision: in.HasRevision}, true
}
