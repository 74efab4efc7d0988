package diskscan

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/caretaker-storage/caretaker/internal/clocks"
	"github.com/caretaker-storage/caretaker/orphan"
)

// Orphans is caretaker's adapter for replica data directories on a
// node's Longhorn v1 filesystem disks: one value that is the
// orphan.Adapter (Scan, Judge, Delete, Kinds) and the orphan.Finisher of
// orphan.KindReplicaData. Create it with NewOrphans, tell it the node's
// disks with SetDisks (or Options.Disks), and hand it to orphan.NewMonitor
// and orphan.NewSweeper. Report and LastReport give a tool what the
// Snapshot leaves out: per-disk details, metas and sizes.
//
// It holds what it learns about the disks between calls: the filesystem
// ID each disk had when first scanned, whether a disk may hold
// tombstones, and the last listing of each disk (see "Incremental scans"
// in the package doc). Judge and Delete trust none of the listing: they
// look at the disk themselves.
//
// It is safe for concurrent use: scans are serialised, Judge and Delete
// may run at any time and at once, SetDisks may be called during a scan
// (the scan finishes with the disks it started with).
type Orphans struct {
	expected ExpectedSource
	opts     Options
	host     hostTree // where disk paths are resolved, which mount table judges them
	clock    clock.Clock
	disks    diskSet

	scanMu sync.Mutex // one scan at a time; guards caches and racyAfter
	caches map[orphan.Scope]*diskCache
	// racyAfter is this scan's cut-off for caching, in Unix ns.
	racyAfter int64

	lastMu sync.Mutex
	last   Report

	busyMu sync.Mutex
	busy   map[busyKey]struct{} // directories being purged by this value

	metaReads atomic.Int64 // volume.meta files opened, for tests and benchmarks
	listings  atomic.Int64 // replicas directories listed, for tests and benchmarks
	hooks     hooks

	// walkOpens and walkEntries count the directories the size walks
	// opened below the directories validated and the entries they looked
	// at, for tests and benchmarks.
	walkOpens, walkEntries atomic.Int64
}

// Options tune an Orphans value. The zero value means the documented
// defaults.
type Options struct {
	// Disks are the node's disks to start with; SetDisks replaces them.
	// A tool that looks at a fixed disk sets them here.
	Disks []Disk
	// MaxMetaSize bounds a volume.meta read; 0 means DefaultMaxMetaSize.
	// A larger file makes its directory "not a replica".
	MaxMetaSize int64
	// MaxConfigSize bounds a longhorn-disk.cfg read; 0 means
	// DefaultMaxConfigSize. A larger file makes the disk DiskInvalid.
	MaxConfigSize int64
	// Clock tells a scan when it starts. A directory changed within
	// RacyWindow before that is validated again on the next scan too,
	// because filesystem timestamps are coarse: a change in the same tick
	// as the scan would not change them. Nil means the real clock.
	Clock clock.Clock
	// AllowNoneExpected lets Delete purge on a disk whose expected set is
	// empty. By default it refuses (ErrNoneExpected): an empty set is far
	// more often a broken view (a replica list read from the wrong
	// namespace, an informer that lost its cache) than a disk whose every
	// replica is really orphaned. Set it only when the host has checked
	// that view by other means.
	AllowNoneExpected bool
	// ScanWorkers is how many unexpected directories a scan validates at
	// once (each costs an lstat and, when new or changed, a read of its
	// volume.meta and a walk summing its size); 0 or less means
	// DefaultScanWorkers, 1 validates them one after the other. The
	// expected directories are never stat'ed or read, whatever this says.
	ScanWorkers int
	// ListOwned makes DiskReport.OwnedNames list the expected directories
	// (off by default: on a disk of 100k replicas it costs a slice of 100k
	// names per scan).
	ListOwned bool
	// MaxWalkEntries bounds how many entries (at every level) the walk
	// summing an orphan directory's size looks at; 0 or less means
	// DefaultMaxWalkEntries. Beyond it the directory is still reported as
	// an orphan, with OrphanDir.SizeUnknown saying why its size is not
	// known. (The walk's depth is bounded by MaxWalkDepth, which is not an
	// option: it is the depth a purge goes to.)
	MaxWalkEntries int

	// HostRoot, with HostMountInfo, makes every disk a path of another
	// process's filesystem tree: for longhorn-manager's pod, the host's,
	// HostRoot "/host/proc/1/root" and HostMountInfo
	// "/host/proc/1/mountinfo" (the host's /proc mounted at /host/proc, as
	// Longhorn's DaemonSet does). Disk paths stay the host's
	// ("/var/lib/longhorn/"): each is resolved inside HostRoot as if it
	// were "/" (symbolic links, absolute ones too, and ".." never leave
	// it; Linux 5.6 or later), and mount points are judged from
	// HostMountInfo, whose paths are relative to that same root. Everything
	// past the disk path is as without it: confined to <disk>/replicas,
	// never following a link. Empty means this process's own tree and the
	// calling thread's mount table. Only on Linux; elsewhere NewOrphans
	// refuses it (ErrHostRoot).
	HostRoot string
	// HostMountInfo is the mount table of the process whose root HostRoot
	// is; required with HostRoot.
	HostMountInfo string
	// Sequential makes every method do all its work in the calling
	// goroutine, starting none: ScanWorkers is then 1, and the
	// classification of large listings is not spread over the processors.
	// A caller that locked its goroutine to an OS thread
	// (runtime.LockOSThread) and moved that thread into the host's mount
	// namespace (setns(2)) needs it, because a goroutine started from there
	// runs on another thread, in the process's own namespace. The mount
	// table read is always the calling thread's own
	// (/proc/thread-self/mountinfo), so it is the joined namespace's.
	// orphan.Monitor scans in a goroutine of its own: on such a thread,
	// call Scan, Judge, Delete and FinishInterrupted directly.
	Sequential bool
}

// RacyWindow is how recently changed a directory may be and still have
// its validation cached. Kernel file timestamps advance in ticks of a few
// milliseconds; a second leaves a wide margin.
const RacyWindow = time.Second

// ErrNoExpectedSource is returned by NewOrphans without an ExpectedSource.
var ErrNoExpectedSource = errors.New("diskscan: NewOrphans needs an ExpectedSource")

// NewOrphans returns the adapter of the replica directories the cluster
// does not expect, judged against expected. It returns an error naming the
// option that is invalid: ErrNoExpectedSource without expected, an error
// wrapping ErrHostRoot for unusable HostRoot and HostMountInfo, or the
// error SetDisks returns for opts.Disks.
func NewOrphans(expected ExpectedSource, opts Options) (_ *Orphans, err error) {
	defer withPrefix(&err)
	if expected == nil {
		return nil, ErrNoExpectedSource
	}
	host, err := newHostTree(opts.HostRoot, opts.HostMountInfo)
	if err != nil {
		return nil, err
	}
	o := &Orphans{
		host:     host,
		expected: expected,
		opts:     opts,
		clock:    clocks.Or(opts.Clock),
		caches:   map[orphan.Scope]*diskCache{},
		busy:     map[busyKey]struct{}{},
	}
	o.opts.Disks = nil // the disk set holds them from now on
	if err := o.disks.set(opts.Disks); err != nil {
		return nil, err
	}
	return o, nil
}

// SetDisks replaces the node's disks; hosts call it whenever their Node
// object changes. Every disk needs NodeID, Name, UUID and an absolute
// Path without ".." elements, and no two disks of a node may share a
// name; otherwise SetDisks changes nothing and returns an error. The
// filesystem IDs pinned by scans are kept for disks whose Path and UUID
// did not change. It is safe to call at any time, also during a scan.
func (o *Orphans) SetDisks(disks ...Disk) (err error) {
	defer withPrefix(&err)
	return o.disks.set(disks)
}

// Disks returns a copy of the disks, sorted by node and name.
func (o *Orphans) Disks() []Disk { return o.disks.list() }

// Kinds implements orphan.Adapter: replica data directories only.
func (o *Orphans) Kinds() []orphan.Kind { return []orphan.Kind{orphan.KindReplicaData} }

// hooks let in-package tests step in at the moments a race or a crash
// could happen. They are nil outside tests.
type hooks struct {
	// afterTombstone runs right after the rename to the tombstone, before
	// the checks that follow it.
	afterTombstone func(replicas, tombstone string)
	// afterRemove runs after the removal walk removes an entry, with its
	// path relative to <disk>/replicas.
	afterRemove func(path string)
	// validated runs when a scan has validated an unexpected directory,
	// in the goroutine that did.
	validated func(name string)
}

var (
	_ orphan.Adapter  = (*Orphans)(nil)
	_ orphan.Finisher = (*Orphans)(nil)
)
