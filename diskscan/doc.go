// Package diskscan finds and purges orphaned replica directories on
// Longhorn v1 filesystem disks. It is caretaker's real adapter for the
// orphan package: NewOrphans returns one value, *Orphans, that is the
// orphan.Adapter of orphan.KindReplicaData (it scans the replica
// directories of a node's disks, judges them, and deletes only what it can
// prove orphaned at the moment it acts) and its orphan.Finisher. It works
// on real disks, is byte-compatible with Longhorn's layout, and runs on
// Linux only (statfs(2), os.Root).
//
// # In short
//
// You implement an ExpectedSource: the replica directories the cluster
// expects on each disk (NewStaticExpected over your Replica informer's
// cache, kept current with StaticExpected.Replace, is enough). The one
// constructor is NewOrphans(expected, Options{}); give it the node's
// disks with Orphans.SetDisks whenever the Node object changes. The
// result is an orphan.Adapter: hand it to orphan.NewMonitor and
// orphan.NewSweeper and run the orphan package's loop (Monitor.Latest,
// then Sweeper.Reconcile with the node's health as Cycle.Scopes). Without a
// cluster, Orphans.Report scans once and says what it found, as the
// longhorn-disk example does.
//
// # In depth
//
// A disk is a directory holding longhorn-disk.cfg (JSON with the disk's
// UUID) and replicas/, with one directory per replica named
// <volume>-<8 letters or digits> and holding a volume.meta. A directory is
// a replica only if it is a real directory (never a symbolic link), its
// name follows that rule, and its volume.meta parses by ParseVolumeMeta's
// rule: the replica format of some engine release, read strictly (see
// VolumeMeta; a replica of an engine as old as v0.1.0 is one), with a
// Size above 0 and a Head named. That is the rule salvage.Inspect applies
// to a copy's volume.meta, so the scan never reports as a replica a
// directory the last-copy guard's inspection would call corrupt.
// Longhorn's own check is weaker (longhorn-manager's disk monitor takes
// any volume.meta that unmarshals into its VolumeMeta, even {}): an
// unexpected directory it would call an orphan and caretaker does not is
// in DiskReport.Skipped with the reason, never left out. A replica no
// replica object of the cluster expects on that disk is an
// orphan. The disk must also be the disk the host expects: the UUID in its
// config and its filesystem ID (computed as Longhorn does, see FSID) must
// match, and no other disk of the node may share its filesystem;
// otherwise the disk reports DiskChanged or DiskInvalid and no items, so
// its records are forgotten and its data kept.
//
// # Safety
//
// Orphans.Delete deletes nothing it cannot prove orphaned at the moment it
// acts (its doc lists the checks in order). In short:
//
//   - Identity: the disk's UUID (longhorn-disk.cfg) and filesystem ID, the
//     directory's name, type and volume.meta, and the expected set are all
//     checked again at purge time; the scan's cache is never trusted.
//   - Stale snapshots: Judge calls an item whose directory is no longer on
//     disk undecided, so a snapshot taken before a purge cannot recreate
//     its record.
//   - Broken views: a disk whose expected set is empty is not purged
//     (ErrNoneExpected) unless Options.AllowNoneExpected; Scan reports the
//     evidence (ScopeStatus.NoneExpected, OwnedUnlisted) for the orphan
//     core's mass-deletion guard.
//   - Confinement: everything happens inside <disk>/replicas through an
//     os.Root, or (a scan's validations, on Linux) through a descriptor of
//     <disk>/replicas opened by it, relative to which only single names
//     are opened with O_NOFOLLOW; symbolic links are never followed (a
//     link is removed as an entry inside a tombstone, never entered).
//   - Mount boundary: a mount point at or below an orphan directory (a
//     tmpfs, another disk, or a bind mount of the same filesystem) stops
//     the purge with ErrMountPoint before the rename, and again while
//     removing: the mount table (the calling thread's, or the host's with
//     Options.HostRoot) is read before and after the rename, and every directory the removal walk enters must
//     be on the device and in the mount (mnt_id) of <disk>/replicas. The
//     walk is caretaker's own; os.Root.RemoveAll would descend into a
//     mount. Without /proc nothing is purged. <disk>/replicas itself
//     must be on the device and in the mount of the disk directory: a
//     mount point there (another disk's replicas directory bind-mounted
//     over it) holds directories the disk's identity checks say nothing
//     about, so the scan reports the disk DiskInvalid and Delete and
//     FinishInterrupted refuse it (ErrMountPoint).
//   - Non-regular files: volume.meta, longhorn-disk.cfg and markers are
//     lstat'ed, opened non-blocking and fstat'ed; a FIFO, socket, device
//     or link is ErrNotRegular ("not a replica", DiskInvalid), never a
//     hang. Directories are opened with O_DIRECTORY|O_NONBLOCK. Every read
//     is bounded.
//   - Own tombstones: a durable marker (fsync'd, beside the tombstone)
//     records the directory's name, the tombstone's name with a random
//     64-bit token, and the directory's device and inode before the
//     rename. FinishInterrupted removes a tombstone only if its marker
//     proves it (ErrForeignTombstone otherwise: reported, kept), then the
//     marker. Tombstones of caretaker versions that wrote no markers are
//     kept too; remove them by hand after checking them. A tombstone whose
//     name a replica expects again is renamed back if the name is free,
//     and kept (ErrStillExpected) while the name is taken and expected.
//   - Inode reuse: after the rename, the tombstone must have the type,
//     device and inode of the directory checked (os.SameFile compares only
//     device and inode; a symbolic link can get a freed directory's inode).
//   - Cancellation: the removal walk checks ctx between entries and stops,
//     leaving the marked tombstone for FinishInterrupted; a scan checks it
//     between unexpected entries (its workers stop taking entries, and it
//     fails with ctx's error and no report).
//   - Bounded scans: the walk summing an orphan's size opens each
//     directory once, relative to its parent, never follows a link or
//     crosses a mount, and stops at MaxWalkDepth levels (the directory is
//     then skipped as not a replica: a purge would refuse it too) or at
//     Options.MaxWalkEntries entries (its size is then reported unknown,
//     OrphanDir.SizeUnknown), so one strange directory cannot stall the
//     scans of a node.
//   - Names: a directory whose tombstone or marker name would not fit in
//     255 bytes is never reported as an orphan (skipped with the reason).
//
// What remains: a mount made in another mount namespace that does not
// propagate to the one the disks are reached in is invisible in the mount
// table; a bind mount of the same filesystem is then caught only by the
// walk's mount ID check, which sees what that namespace sees. In a pod,
// reach the disks in the host's namespace (see "Inside Longhorn's pod"),
// or mounts made on the host are missed by the table. A directory someone
// creates under a purge's exact tombstone name (token included, so they
// read the marker) after the tombstone was removed and before its marker
// was, and which gets the same inode number, would be taken for ours.
//
// # Host duties
//
//  1. Provide an ExpectedSource: which data directory names the cluster
//     expects on each disk (replica spec.dataDirectoryName by spec.diskID),
//     and run diskscantest.RunConformanceTests against it. StaticExpected
//     holds a list; ParseReplicaList reads the JSON of `kubectl get
//     replicas.longhorn.io -n longhorn-system -o json` (without -n it
//     prints an empty list). Hand out the same NameSet while nothing
//     changed: rescans then skip the look-ups; a new set with the same
//     names costs a rescan a digest of the set (StaticExpected.Replace
//     keeps the set it had when the names are the same). An empty set
//     beside replica directories is reported (ScopeStatus.NoneExpected)
//     and refused at purge time; set Options.AllowNoneExpected only if
//     the host has confirmed by other means that nothing is expected.
//  2. Create one Orphans per node with NewOrphans, and describe the node's
//     disks with SetDisks (node, name, path, expected UUID and, if known,
//     filesystem ID) whenever the Node object changes. Give Disk.Path
//     exactly as the node spec holds it, trailing slash included
//     (Longhorn's default is "/var/lib/longhorn/"): the orphan name is a
//     hash over that string, the DiskPath parameter and the records carry
//     it, and Judge and Delete compare a record's path with the disk's as
//     strings. Filesystem calls use the cleaned path.
//  3. Hand the Orphans to orphan.NewMonitor (as the Inventory) and to
//     orphan.NewSweeper, exactly as for any other orphan kind; in each
//     reconcile, run Sweeper.Reconcile on the Monitor's latest observation with
//     Cycle.ObservedAt set to its StartedAt. The snapshot's scope status
//     carries OwnedUnlisted (the expected directories, which are counted
//     but not listed as items) and NoneExpected, the evidence orphan's
//     mass-deletion guard weighs.
//  4. Let the Sweeper call FinishInterrupted (it does, once per sync), so
//     purges a crash or a cancellation interrupted are finished. Run with
//     /proc mounted (the mount checks need it). In a pod, reach the disks
//     through the host (see "Inside Longhorn's pod").
//  5. For sizes and reasons, read LastReport (what the Monitor's last scan
//     saw) rather than scanning again; a tool without a Monitor calls
//     Report.
//
// # Inside Longhorn's pod
//
// longhorn-manager reaches every disk in the host's mount namespace: its
// disk monitor calls ns.GetDiskStat and removes replica directories with
// ns.DeletePath (longhorn/go-common-libs), each run on a locked OS thread
// that joined the namespaces of /host/proc/1. An Orphans in such a pod
// works in one of two ways:
//
//   - Options.HostRoot "/host/proc/1/root" and Options.HostMountInfo
//     "/host/proc/1/mountinfo": disk paths stay the host's
//     ("/var/lib/longhorn/") and are resolved inside the host root as the
//     host resolves them (openat2 RESOLVE_IN_ROOT, Linux 5.6 or later: a
//     symbolic link, absolute or with "..", never leaves it), and mount
//     points are judged from the host's mount table, whose paths are
//     relative to that root. Everything below a disk path is confined as
//     always. Any goroutine may call it.
//   - Options.Sequential on the joined thread: every method then does all
//     its work in the calling goroutine (a goroutine started from there
//     would run on another thread, in the pod's namespace), and the mount
//     table read is the calling thread's own (/proc/thread-self/mountinfo,
//     while /proc/self/mountinfo shows the main thread's namespace).
//
// A finalizer reconciling one Orphan has no long-lived Orphans whose scan
// pinned the disk's filesystem ID. Give it Disk.FSID instead: Longhorn's
// disk monitor computes the same value for every filesystem disk
// (DiskStat.DiskID, "%012x" of f_fsid's words, in getDiskStatForPath of
// go-common-libs's io package, called through ns.GetDiskStat). A purge
// still statfs'es the disk through the handle it opens and refuses
// (ErrDiskChanged) if the filesystem is another, exactly as with a pinned
// ID; without either ID it refuses too.
//
// # Deviations from Longhorn
//
// Longhorn's disk monitor (getOrphanedReplicaDirectoryNames in
// controller/monitor/disk_monitor.go of longhorn-manager) lists the
// replicas whose spec.diskID is the disk's UUID and lets one claim its
// directory only if its spec.diskPath equals the disk's path string. So a
// replica whose diskPath differs only by a trailing slash, or is stale,
// leaves its live directory looking orphaned. StaticExpected claims by
// disk UUID whatever the path says, and matches replicas without a disk
// UUID by the cleaned path: both err towards "owned". Longhorn reads
// volume.meta by running cat on the host (GetVolumeMeta in util/util.go),
// which a FIFO there blocks; caretaker never opens a non-regular file.
// Longhorn removes a replica directory with `rm -rf` on the host
// (DeleteReplicaDirectory in util/util.go), or with os.RemoveAll on a
// thread in the host's namespace (ns.DeletePath of go-common-libs), both
// of which descend into mounts; caretaker renames it to a marked
// tombstone first and never crosses a mount. Longhorn identifies a disk by
// its longhorn-disk.cfg and the filesystem ID of the disk path, and then
// lists <disk>/replicas whatever is mounted there; caretaker refuses a
// replicas directory that is not in the disk directory's mount (the disk
// is DiskInvalid), since the identity checks say nothing about it.
//
// # The loop
//
//	expected := diskscan.NewStaticExpected(refs...) // or your informer-backed ExpectedSource
//	orphans, err := diskscan.NewOrphans(expected, diskscan.Options{})
//	if err != nil { ... }
//	// whenever the Node object changes:
//	if err := orphans.SetDisks(diskscan.Disk{NodeID: node, Name: "disk-1", Path: "/var/lib/longhorn/", UUID: uuid}); err != nil { ... }
//	m, err := orphan.NewMonitor(orphans, orphan.MonitorOptions{OnChange: func(orphan.Observation) { enqueue(node) }})
//	if err != nil { ... }
//	if err := m.Start(ctx); err != nil { ... }
//	defer m.Stop()
//	s, err := orphan.NewSweeper(store, orphans, orphan.SweeperOptions{}) // store: your Orphan CRs, or orphan.NewMemStore()
//	if err != nil { ... }
//	// in the node's reconcile:
//	if obs, ok := m.Latest(); ok && obs.Err == nil {
//		plan, res, err := s.Reconcile(ctx, obs.Snapshot, orphan.Cycle{
//			Selector:   orphan.Selector{NodeID: node},
//			Scopes:     health,    // the host's own view: node Ready or down, node or disk evicted
//			Policy:     policy,    // orphan.ParsePolicy(setting, gracePeriod)
//			ObservedAt: obs.StartedAt,
//		})
//		// log plan, res.Refused and err; requeue at plan.RequeueAt;
//		// orphans.LastReport() has sizes and reasons.
//	}
//
// # Incremental scans
//
// Orphans keeps the last listing of each disk and skips work a rescan of
// an unchanged disk does not need; none of it is trusted by Judge or
// Delete, which look at the disk and ask the ExpectedSource themselves at
// the moment they act, so the cache only shapes reports.
//
//   - The listing of <disk>/replicas is reused while the directory keeps
//     the stamp it had just before it was listed (device, inode, mtime,
//     ctime, link count, size) and that stamp was older than RacyWindow
//     when it was listed. Creating, removing or renaming an entry, or
//     replacing one by a symbolic link, sets the directory's mtime and
//     ctime; the window covers a change in the very tick of the listing.
//     A disk that is not Ready (its UUID or filesystem changed, say) loses
//     its listing.
//   - Which listed directories are expected is reused while the source
//     hands out the same NameSet, or a set with the same names: the very
//     same strings (a set rebuilt from the same informer objects) are told
//     by a keyed print of their addresses, which reads no name; other
//     strings by a keyed digest of the names (hashing them, about a tenth
//     of looking every name up). A changed set re-classifies the listing
//     without listing the disk again.
//   - Expected directories are never stat'ed or read. Every unexpected
//     directory is lstat'ed (on Linux: opened O_NOFOLLOW|O_DIRECTORY and
//     fstat'ed, and its volume.meta and size read inside that very
//     directory) on every scan; its volume.meta is read when it
//     is new or its inode, mtime or ctime changed (the engine writes
//     volume.meta.tmp and renames it, which changes the directory's
//     mtime), or when it changed within RacyWindow of the last scan.
//
// A scan classifies the listed names against the expected set in chunks
// spread over the processors, and validates the unexpected directories
// with a bounded pool of workers (Options.ScanWorkers, DefaultScanWorkers
// by default). Workers only read the disk; their results are applied in
// name order by the scan itself, so a report does not depend on the
// number of workers. A cold scan of 100k replica directories, 1% of them
// orphans, costs about 0.6 of Longhorn's own cycle on the same disk
// (BenchmarkColdScan100k).
//
// An unchanged rescan of a disk with 100k replica directories, 1% of them
// orphans, costs an fstat, one lstat per orphan and at most a print of
// the expected set: about a tenth of one listing of the directory, a
// fifth with a digest of new strings (BenchmarkRescanUnchanged100k).
//
// # Errors
//
// NewOrphans and SetDisks refuse an invalid disk list with an error and
// change nothing; NewOrphans without a source is ErrNoExpectedSource.
// Parsers return *ParseError wrapping ErrCorrupt, ErrNotRegular or a
// *bounded.TooLargeError (errors.Is(err, ErrTooLarge), the same value in
// every caretaker package); every read is bounded (Options,
// DefaultMaxMetaSize, DefaultMaxConfigSize, DefaultMaxReplicaListSize).
// Scan and Report fail only with their context's error: a disk's trouble
// is its scope's health (DiskInvalid, DiskChanged, Unknown when its
// replicas cannot be listed or the expected source fails), and an entry's
// trouble is an orphan.Skipped with the reason. Judge answers undecided
// when it cannot tell, and fails only with ctx's error. Delete refuses
// with an error wrapping orphan.ErrPreconditionFailed and one of
// ErrUnsafePath, ErrNotReplica, ErrDiskChanged, ErrDiskInvalid,
// ErrUnknownDisk, ErrStillExpected, ErrNoneExpected or ErrMountPoint; if
// the refusal came before the rename nothing was touched, and after it
// the directory was renamed back (ErrMountPoint met by the removal walk
// itself leaves the marked tombstone, and the mount, for later). An error
// wrapping ctx's error means the purge stopped and left a marked
// tombstone. Data already gone is success. FinishInterrupted returns a
// *multierror.Error, one entry per disk that failed, and reports
// look-alike tombstones with ErrForeignTombstone. Other errors (I/O, the
// expected source failing) are retryable on the next sweep. diskscan has
// no NotFound class: a missing disk or directory is a scope's health, a
// refusal, or success.
//
// Every error text starts with "diskscan: ", also an I/O error from the
// standard library (it stays reachable with errors.Is and errors.As), except
// a context's own error, returned as it is. ErrCorrupt is of the library's
// one malformed-input class: errors.Is(err, diskscan.ErrCorrupt) also holds
// for salvage.ErrCorrupt and tokenring.ErrMalformedReply, and the reverse.
//
// # Concurrency
//
// Orphans and StaticExpected are safe for concurrent use. Scan and Report
// are serialised; Judge, Delete, FinishInterrupted, SetDisks and
// LastReport may be called at any time. Delete may purge different
// records at once; the Sweeper never purges one record twice at once (a
// second concurrent purge of one directory fails and is retried).
package diskscan
