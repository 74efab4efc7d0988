package diskscan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/caretaker-storage/caretaker/internal/safefile"
	"github.com/caretaker-storage/caretaker/orphan"
)

// Options tune an Inventory and a Deleter. The zero value means the
// documented defaults.
type Options struct {
	// MaxMetaSize bounds a volume.meta read; 0 means DefaultMaxMetaSize.
	// A larger file makes its directory "not a replica".
	MaxMetaSize int64
	// MaxConfigSize bounds a longhorn-disk.cfg read; 0 means
	// DefaultMaxConfigSize. A larger file makes the disk DiskInvalid.
	MaxConfigSize int64
	// Clock tells the Inventory when a scan starts. A directory changed
	// within RacyWindow before that is validated again on the next scan
	// too, because filesystem timestamps are coarse: a change in the same
	// tick as the scan would not change them. Nil means the real clock.
	Clock clock.PassiveClock
	// AllowNoneExpected lets the Deleter purge on a disk whose expected set
	// is empty. By default it refuses (ErrNoneExpected): an empty set is
	// far more often a broken view (a replica list read from the wrong
	// namespace, an informer that lost its cache) than a disk whose every
	// replica is really orphaned. Set it only when the host has checked
	// that view by other means.
	AllowNoneExpected bool
	// ListOwned makes DiskReport.OwnedNames list the expected directories
	// (off by default: on a disk of 100k replicas it costs a slice of 100k
	// names per scan).
	ListOwned bool
}

// RacyWindow is how recently changed a directory may be and still have
// its validation cached. Kernel file timestamps advance in ticks of a few
// milliseconds; a second leaves a wide margin.
const RacyWindow = time.Second

// Report is what one scan of the disks saw, richer than the Snapshot the
// orphan package consumes: per-disk details, metas and sizes.
type Report struct {
	Disks []DiskReport // in the DiskSet's order
}

// DiskReport is one disk's part of a Report.
type DiskReport struct {
	Disk   Disk
	Status orphan.ScopeStatus
	FSID   string     // the filesystem ID seen, if statfs succeeded
	Config DiskConfig // the config read, if it parsed

	Entries    int      // entries in <disk>/replicas
	Owned      int      // replica directories the cluster expects
	OwnedNames []string // with Options.ListOwned, sorted
	// Orphans are the valid replica directories no replica expected at
	// scan time, sorted by name. They become orphan.Items.
	Orphans []OrphanDir
	// Skipped are entries that are not replica directories, with why.
	Skipped []orphan.Skipped
	// OrphanBytes is the sum of the orphans' AllocatedBytes.
	OrphanBytes int64
}

// OrphanDir is a valid replica directory that no replica expects.
type OrphanDir struct {
	Name string
	Item orphan.Item
	Meta VolumeMeta
	// AllocatedBytes is the space its regular files occupy (st_blocks ×
	// 512, so a sparse image counts only its written blocks). It is
	// computed when the directory is first seen or has changed (a file
	// created, removed or renamed in it); writes into an existing file do
	// not refresh it. Files that cannot be read are left out.
	AllocatedBytes int64
}

// Snapshot converts the report to the orphan package's Snapshot: the
// orphans as items, each disk's scope health, and the skipped entries.
func (r Report) Snapshot() orphan.Snapshot {
	s := orphan.Snapshot{Scopes: make(map[orphan.Scope]orphan.ScopeStatus, len(r.Disks))}
	for _, d := range r.Disks {
		s.Scopes[d.Disk.Scope()] = d.Status
		for _, o := range d.Orphans {
			s.Items = append(s.Items, o.Item)
		}
		s.Skipped = append(s.Skipped, d.Skipped...)
	}
	return s
}

// Inventory lists the replica directories of a DiskSet's disks and reports
// those no replica expects. It implements orphan.Inventory.
//
// It keeps, per disk, what it learned about each unexpected directory
// (keyed by the directory's inode and times), so a rescan of an unchanged
// disk costs one directory listing, one look-up per entry and one lstat per
// unexpected entry: volume.meta is read again only for directories that
// are new or changed. Expected directories are never stat'ed or read: they
// are owned whatever they hold. The cache only drives reporting; the
// Deleter trusts none of it.
type Inventory struct {
	disks    *DiskSet
	expected ExpectedSource
	opts     Options

	mu     sync.Mutex // one scan at a time; guards caches
	caches map[orphan.Scope]*diskCache

	lastMu sync.Mutex
	last   Report

	metaReads atomic.Int64 // volume.meta files opened; tests read it
	racyAfter int64        // this scan's cut-off for caching, in Unix ns
}

// NewInventory returns an Inventory of disks, judged against expected.
func NewInventory(disks *DiskSet, expected ExpectedSource, opts Options) *Inventory {
	return &Inventory{disks: disks, expected: expected, opts: opts, caches: map[orphan.Scope]*diskCache{}}
}

// Scan implements orphan.Inventory: it scans every disk and returns the
// Snapshot of the Report. Per-disk trouble is in the disk's scope health;
// the error is only ctx's. Calls are serialised.
func (inv *Inventory) Scan(ctx context.Context) (orphan.Snapshot, error) {
	r, err := inv.ScanReport(ctx)
	if err != nil {
		return orphan.Snapshot{}, err
	}
	return r.Snapshot(), nil
}

// LastReport returns the report of the last completed scan (the zero
// Report before the first), so a host that runs the Inventory under
// orphan.Monitor can show sizes without scanning again. The Report is
// the caller's to keep but must not be modified.
func (inv *Inventory) LastReport() Report {
	inv.lastMu.Lock()
	defer inv.lastMu.Unlock()
	return inv.last
}

// ScanReport scans every disk and returns the full Report.
func (inv *Inventory) ScanReport(ctx context.Context) (Report, error) {
	inv.mu.Lock()
	defer inv.mu.Unlock()

	clk := inv.opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	inv.racyAfter = clk.Now().Add(-RacyWindow).UnixNano()
	disks := inv.disks.Disks()
	reps := make([]DiskReport, len(disks))
	opened := make([]*os.Root, len(disks))
	defer func() {
		for _, r := range opened {
			if r != nil {
				r.Close()
			}
		}
	}()
	for i, d := range disks {
		if err := ctx.Err(); err != nil {
			return Report{}, err
		}
		reps[i], opened[i] = inv.checkDisk(d)
	}
	markSharedFilesystems(reps)
	live := make(map[orphan.Scope]bool, len(disks))
	for i, d := range disks {
		live[d.Scope()] = true
		if reps[i].Status.Health != orphan.HealthReady {
			continue
		}
		if err := inv.listDisk(ctx, &reps[i], opened[i]); err != nil {
			return Report{}, err
		}
	}
	for s := range inv.caches {
		if !live[s] {
			delete(inv.caches, s)
		}
	}
	r := Report{Disks: reps}
	inv.lastMu.Lock()
	inv.last = r
	inv.lastMu.Unlock()
	return r, nil
}

// checkDisk opens the disk and checks its identity: filesystem ID, then
// config. It returns the open root when the disk is Ready.
func (inv *Inventory) checkDisk(d Disk) (DiskReport, *os.Root) {
	rep := DiskReport{Disk: d, Status: orphan.ScopeStatus{Health: orphan.HealthReady}}
	id, err := checkIdentity(inv.disks, d, inv.opts)
	rep.FSID, rep.Config = id.fsid, id.cfg
	if err != nil {
		rep.Status = statusOf(err)
		if id.root != nil {
			id.root.Close()
		}
		return rep, nil
	}
	if inv.disks.expectedFSID(d) == "" {
		inv.disks.pin(d, id.fsid)
	}
	return rep, id.root
}

// identity is what checkIdentity found.
type identity struct {
	root *os.Root
	fsid string
	cfg  DiskConfig
}

// checkIdentity opens d's path and checks that its filesystem ID is the
// expected one (if one is known) and that its config names d's UUID. The
// filesystem ID and the config are read through the same open directory,
// so both are of the same filesystem. Errors wrap ErrDiskChanged,
// ErrDiskInvalid, or are I/O errors.
func checkIdentity(disks *DiskSet, d Disk, opts Options) (identity, error) {
	var id identity
	root, err := os.OpenRoot(d.fsPath())
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return id, fmt.Errorf("%w: disk path does not exist", ErrDiskInvalid)
		}
		return id, fmt.Errorf("open disk path: %w", err)
	}
	id.root = root
	self, err := root.Open(".")
	if err != nil {
		return id, fmt.Errorf("open disk path: %w", err)
	}
	id.fsid, err = fsidOf(self)
	self.Close()
	if err != nil {
		return id, err
	}
	if want := disks.expectedFSID(d); want != "" && want != id.fsid {
		return id, fmt.Errorf("%w: filesystem ID is %s, expected %s: another filesystem is mounted at the disk path", ErrDiskChanged, id.fsid, want)
	}
	f, err := openRegular(root, ConfigFile, ConfigFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return id, fmt.Errorf("%w: no %s", ErrDiskInvalid, ConfigFile)
		}
		if errors.Is(err, ErrNotRegular) {
			return id, fmt.Errorf("%w: %v", ErrDiskInvalid, err)
		}
		return id, fmt.Errorf("open %s: %w", ConfigFile, err)
	}
	id.cfg, err = ReadDiskConfig(f, opts.MaxConfigSize)
	f.Close()
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			return id, fmt.Errorf("%w: %v", ErrDiskInvalid, err)
		}
		return id, err
	}
	if id.cfg.DiskUUID != d.UUID {
		return id, fmt.Errorf("%w: %s has diskUUID %s, expected %s", ErrDiskChanged, ConfigFile, id.cfg.DiskUUID, d.UUID)
	}
	return id, nil
}

// statusOf maps a checkIdentity error to a scope status.
func statusOf(err error) orphan.ScopeStatus {
	switch {
	case errors.Is(err, ErrDiskChanged):
		return orphan.ScopeStatus{Health: orphan.HealthDiskChanged, Message: err.Error()}
	case errors.Is(err, ErrDiskInvalid):
		return orphan.ScopeStatus{Health: orphan.HealthDiskInvalid, Message: err.Error()}
	}
	return orphan.ScopeStatus{Health: orphan.HealthUnknown, Message: err.Error()}
}

// markSharedFilesystems makes every disk that shares its filesystem ID
// with another disk of its node DiskInvalid: Longhorn cannot tell such
// disks apart, so neither's directories can be trusted to be its own.
func markSharedFilesystems(reps []DiskReport) {
	type key struct{ node, fsid string }
	byFS := map[key][]int{}
	for i, r := range reps {
		if r.FSID != "" {
			k := key{r.Disk.NodeID, r.FSID}
			byFS[k] = append(byFS[k], i)
		}
	}
	for k, idx := range byFS {
		if len(idx) < 2 {
			continue
		}
		for _, i := range idx {
			var others []string
			for _, j := range idx {
				if j != i {
					others = append(others, reps[j].Disk.Name)
				}
			}
			reps[i].Status = orphan.ScopeStatus{
				Health:  orphan.HealthDiskInvalid,
				Message: fmt.Sprintf("%v: filesystem %s is shared with disk %s of node %s; neither disk is trusted", ErrDiskInvalid, k.fsid, strings.Join(others, ", "), k.node),
			}
		}
	}
}

// diskCache is what an Inventory remembers of one disk between scans.
type diskCache struct {
	path, uuid string
	entries    map[string]*cachedEntry // unexpected directories, by name

	// The previous listing in the kernel's order (stable while the
	// directory does not change), whether each name was expected, and the
	// set that said so. While the expected source hands out the same set
	// (it may not modify a set it handed out), a name at the same position
	// as last time is expected again without hashing it: on a large disk
	// the look-ups would cost more than the listing.
	names      []string
	owned      []bool
	set        NameSet
	spareNames []string // the buffers of the listing before, reused
	spareOwned []bool
}

// cachedEntry is the validation of one unexpected directory, valid while
// the directory's identity is unchanged.
type cachedEntry struct {
	id        dirIdentity
	reason    string // why it is not a replica; "" if it is
	meta      VolumeMeta
	allocated int64
}

// listDisk lists <disk>/replicas and fills rep's entries. Per-disk trouble
// goes into rep.Status; the error is only ctx's.
func (inv *Inventory) listDisk(ctx context.Context, rep *DiskReport, root *os.Root) error {
	d := rep.Disk
	unknown := func(format string, args ...any) error {
		rep.Status = orphan.ScopeStatus{Health: orphan.HealthUnknown, Message: fmt.Sprintf(format, args...)}
		return nil
	}
	fi, err := root.Lstat(ReplicasDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		rep.Status.Message = "no " + ReplicasDir + " directory: nothing to scan"
		delete(inv.caches, d.Scope())
		// Still asked, so NoneExpected tells the truth for every Ready disk.
		expected, err := inv.expected.Expected(ctx, d)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return unknown("expected replicas unknown: %v", err)
		}
		rep.Status.NoneExpected = len(expected) == 0
		return nil
	case err != nil:
		return unknown("stat %s: %v", ReplicasDir, err)
	case !fi.IsDir():
		rep.Status = orphan.ScopeStatus{Health: orphan.HealthDiskInvalid,
			Message: fmt.Sprintf("%v: %s is a %s, not a directory", ErrDiskInvalid, ReplicasDir, fi.Mode().Type())}
		return nil
	}
	rr, err := root.OpenRoot(ReplicasDir)
	if err != nil {
		return unknown("open %s: %v", ReplicasDir, err)
	}
	defer rr.Close()
	marks := inv.disks.tombMarks(d)
	entries, err := listDir(rr)
	if err != nil {
		return unknown("list %s: %v", ReplicasDir, err)
	}
	// Asked after listing, so a replica created meanwhile is either not
	// listed or already expected.
	expected, err := inv.expected.Expected(ctx, d)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return unknown("expected replicas unknown: %v", err)
	}

	cache := inv.caches[d.Scope()]
	if cache == nil || cache.path != d.Path || cache.uuid != d.UUID {
		cache = &diskCache{path: d.Path, uuid: d.UUID, entries: map[string]*cachedEntry{}}
		inv.caches[d.Scope()] = cache
	}
	seen := make(map[string]struct{}, len(cache.entries))
	rep.Entries = len(entries)
	sameSet := expected != nil && sameNameSet(cache.set, expected)
	names, owned := resize(cache.spareNames, len(entries)), resize(cache.spareOwned, len(entries))
	clear(owned)
	skip := func(name, reason string) {
		rep.Skipped = append(rep.Skipped, orphan.Skipped{Scope: d.Scope(), Name: name, Reason: reason})
	}
	tombstones := 0
	for i, e := range entries {
		if i%4096 == 4095 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		name, typ := e.Name(), e.Type()
		names[i] = name
		if sameSet && typ.IsDir() && i < len(cache.names) && cache.owned[i] && cache.names[i] == name {
			owned[i] = true
			rep.Owned++
			if inv.opts.ListOwned {
				rep.OwnedNames = append(rep.OwnedNames, name)
			}
			continue
		}
		switch {
		case isTombstone(name):
			skip(name, "a purge in progress (caretaker tombstone; FinishInterrupted finishes it if its marker proves it is caretaker's)")
			tombstones++
			continue
		case isMarker(name):
			skip(name, "a caretaker purge marker")
			tombstones++
			continue
		case typ&fs.ModeSymlink != 0:
			skip(name, "a symbolic link: never followed")
			continue
		case !typ.IsDir():
			skip(name, "not a directory")
			continue
		case !ValidDataName(name):
			skip(name, "name does not end in -<8 letters or digits>")
			continue
		case expected.Has(name):
			owned[i] = true
			rep.Owned++
			if inv.opts.ListOwned {
				rep.OwnedNames = append(rep.OwnedNames, name)
			}
			continue
		case !purgeable(name):
			skip(name, "name too long to purge safely: its tombstone would exceed 255 bytes")
			continue
		}
		if err := ctx.Err(); err != nil {
			return err // each unexpected entry costs I/O: stop promptly
		}
		ce, ok := inv.validate(ctx, rr, cache, name)
		if err := ctx.Err(); err != nil {
			return err
		}
		if !ok {
			continue // vanished since the listing
		}
		seen[name] = struct{}{}
		if ce.reason != "" {
			skip(name, ce.reason)
			continue
		}
		rep.Orphans = append(rep.Orphans, OrphanDir{Name: name, Item: dataItem(d, name), Meta: ce.meta, AllocatedBytes: ce.allocated})
		rep.OrphanBytes += ce.allocated
	}
	for name := range cache.entries {
		if _, ok := seen[name]; !ok {
			delete(cache.entries, name)
		}
	}
	// The evidence the orphan core's mass-deletion guard weighs: owned
	// directories are not listed as items, so they are counted, and an
	// empty expected set beside valid directories is a broken view.
	rep.Status.OwnedUnlisted = rep.Owned
	rep.Status.NoneExpected = len(expected) == 0
	inv.disks.sawTombstones(d, tombstones > 0, marks)
	clear(cache.names) // drop the old names for the garbage collector
	cache.spareNames, cache.spareOwned = cache.names, cache.owned
	cache.names, cache.owned, cache.set = names, owned, expected
	slices.Sort(rep.OwnedNames)
	slices.SortFunc(rep.Orphans, func(a, b OrphanDir) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(rep.Skipped, func(a, b orphan.Skipped) int { return strings.Compare(a.Name, b.Name) })
	return nil
}

// validate returns what is known of an unexpected directory, reading its
// volume.meta only if the directory is new or changed. It returns false if
// the directory is gone.
func (inv *Inventory) validate(ctx context.Context, rr *os.Root, cache *diskCache, name string) (*cachedEntry, bool) {
	fi, err := rr.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		return &cachedEntry{reason: "cannot stat: " + errText(err)}, true
	}
	if !fi.IsDir() {
		return &cachedEntry{reason: "not a directory"}, true
	}
	id, _ := identityOf(fi)
	if ce := cache.entries[name]; ce != nil && ce.id == id {
		return ce, true
	}
	ce := &cachedEntry{id: id}
	inv.metaReads.Add(1)
	meta, err := readMeta(rr, name, inv.opts.MaxMetaSize)
	var pe *ParseError
	switch {
	case err == nil:
		ce.meta = meta
		ce.allocated = allocatedUnder(ctx, rr, name)
	case errors.As(err, &pe):
		ce.reason = "invalid " + MetaFile + ": " + pe.Reason
		switch {
		case errors.Is(err, ErrTooLarge):
			ce.reason = MetaFile + " is too large (" + pe.Reason + ")"
		case errors.Is(err, ErrNotRegular):
			ce.reason = "not a replica: " + MetaFile + " is " + pe.Reason
		}
	case errors.Is(err, fs.ErrNotExist):
		ce.reason = "no " + MetaFile
	default:
		// Not cached: an I/O or permission error may pass, and a chmod
		// changes ctime anyway.
		return &cachedEntry{reason: "cannot read " + MetaFile + ": " + errText(err)}, true
	}
	if ctx.Err() != nil {
		return ce, true // a partial size is never cached; the scan fails anyway
	}
	if id.mtime < inv.racyAfter && id.ctime < inv.racyAfter {
		cache.entries[name] = ce
	} else {
		delete(cache.entries, name)
	}
	return ce, true
}

// sameNameSet reports whether a and b are the same map, not just equal.
func sameNameSet(a, b NameSet) bool {
	return a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// resize returns s with length n, reusing its array if it is large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// listDir lists the directory rr holds, unsorted: sorting 100k names
// would cost more than the rest of an unchanged rescan, and only the few
// orphans and skips need an order.
//
// A directory opened through an os.Root lstat's every entry while listing
// (its entries cannot load their FileInfo lazily), which would double the
// cost of a scan; a descriptor duplicated from it is an ordinary File that
// lists with the types the kernel returns, of the very same directory.
func listDir(rr *os.Root) ([]fs.DirEntry, error) {
	dir, err := rr.Open(".")
	if err != nil {
		return nil, err
	}
	fd, err := dupFd(dir)
	dir.Close()
	if err != nil {
		return nil, err
	}
	plain := os.NewFile(fd, rr.Name())
	defer plain.Close()
	return plain.ReadDir(-1)
}

// readMeta reads <name>/volume.meta inside rr; it must be a regular file.
func readMeta(rr *os.Root, name string, limit int64) (VolumeMeta, error) {
	f, err := openRegular(rr, name+"/"+MetaFile, MetaFile)
	if err != nil {
		return VolumeMeta{}, err
	}
	defer f.Close()
	return ReadVolumeMeta(f, limit)
}

// openRegular opens name inside root for reading, and only if it is a
// regular file (internal/safefile): a FIFO would block the open, a device
// could have effects on open, and a socket cannot be read at all.
// Anything else is a *ParseError for input wrapping ErrNotRegular.
func openRegular(root *os.Root, name, input string) (*os.File, error) {
	f, _, err := safefile.OpenRegular(root, name)
	var te *safefile.TypeError
	switch {
	case errors.As(err, &te) && te.Swapped:
		return nil, &ParseError{Input: input, Reason: "replaced by another file while being opened", Err: ErrNotRegular}
	case errors.As(err, &te):
		return nil, notRegular(input, te.Mode)
	}
	return f, err
}

// notRegular says what a non-regular file is.
func notRegular(input string, mode fs.FileMode) error {
	return &ParseError{Input: input, Reason: safefile.Describe(mode) + ", not a regular file", Err: ErrNotRegular}
}

// allocatedUnder sums the allocated bytes of the regular files under name,
// without following symbolic links or opening anything but directories.
// It stops when ctx is done (the scan then fails with ctx's error, so the
// partial sum is never reported).
func allocatedUnder(ctx context.Context, rr *os.Root, name string) int64 {
	var total int64
	_ = fs.WalkDir(rr.FS(), name, func(_ string, e fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return fs.SkipAll
		}
		if err != nil || !e.Type().IsRegular() {
			return nil
		}
		if fi, err := e.Info(); err == nil {
			total += allocatedBytes(fi)
		}
		return nil
	})
	return total
}

// dataItem is the orphan item of directory name on disk d.
func dataItem(d Disk, name string) orphan.Item {
	return orphan.Item{
		Kind:       orphan.KindReplicaData,
		NodeID:     d.NodeID,
		DataEngine: orphan.DataEngineV1,
		Parameters: map[string]string{
			orphan.ParamDataName: name,
			orphan.ParamDiskName: d.Name,
			orphan.ParamDiskUUID: d.UUID,
			orphan.ParamDiskPath: d.Path,
			orphan.ParamDiskType: DiskType,
		},
	}
}

func isTombstone(name string) bool { return looksLikeTombstone(name) }

func isMarker(name string) bool { _, m, ok := parsePurgeEntry(name); return ok && m }

// errText is an error without the path prefix the os package adds, so
// reports do not repeat absolute paths.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
