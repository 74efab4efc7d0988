// Package diskscan finds and purges orphaned replica directories on
// Longhorn v1 filesystem disks. It is caretaker's real adapter for the
// orphan package: an orphan.Inventory of the replica directories of a
// node's disks, an orphan.Judge, and an orphan.Deleter (and
// orphan.Finisher) that deletes only what it can prove orphaned at the
// moment it acts. It works on real disks, is byte-compatible with
// Longhorn's layout, and runs on Linux only (statfs(2), os.Root).
//
// A disk is a directory holding longhorn-disk.cfg (JSON with the disk's
// UUID) and replicas/, with one directory per replica named
// <volume>-<8 letters or digits> and holding a volume.meta. A directory is
// a replica only if it is a real directory (never a symbolic link), its
// name follows that rule, and its volume.meta parses with all its keys. A
// replica no replica object of the cluster expects on that disk is an
// orphan. The disk must also be the disk the host expects: the UUID in its
// config and its filesystem ID (computed as Longhorn does, see FSID) must
// match, and no other disk of the node may share its filesystem;
// otherwise the disk reports DiskChanged or DiskInvalid and no items, so
// its records are forgotten and its data kept.
//
// # Safety
//
// The Deleter deletes nothing it cannot prove orphaned at the moment it
// acts (its doc lists the checks in order). In short:
//
//   - Identity: the disk's UUID (longhorn-disk.cfg) and filesystem ID, the
//     directory's name, type and volume.meta, and the expected set are all
//     checked again at purge time; the Inventory's cache is never trusted.
//   - Broken views: a disk whose expected set is empty is not purged
//     (ErrNoneExpected) unless Options.AllowNoneExpected; the Inventory
//     reports the evidence (ScopeStatus.NoneExpected, OwnedUnlisted) for
//     the orphan core's mass-deletion guard.
//   - Confinement: everything happens inside <disk>/replicas through an
//     os.Root; symbolic links are never followed (a link is removed as an
//     entry inside a tombstone, never entered).
//   - Mount boundary: a mount point at or below an orphan directory (a
//     tmpfs, another disk, or a bind mount of the same filesystem) stops
//     the purge with ErrMountPoint before the rename, and again while
//     removing: the mount table (/proc/self/mountinfo) is read before and
//     after the rename, and every directory the removal walk enters must
//     be on the device and in the mount (mnt_id) of <disk>/replicas. The
//     walk is caretaker's own; os.Root.RemoveAll would descend into a
//     mount. Without /proc nothing is purged.
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
//     kept too; remove them by hand after checking them.
//   - Inode reuse: after the rename, the tombstone must have the type,
//     device and inode of the directory checked (os.SameFile compares only
//     device and inode; a symbolic link can get a freed directory's inode).
//   - Cancellation: the removal walk checks ctx between entries and stops,
//     leaving the marked tombstone for FinishInterrupted; a scan checks it
//     between unexpected entries.
//   - Names: a directory whose tombstone or marker name would not fit in
//     255 bytes is never reported as an orphan (skipped with the reason).
//
// What remains: a mount made in another mount namespace that does not
// propagate to this one is invisible in the mount table; a bind mount of
// the same filesystem is then caught only by the walk's mount ID check,
// which sees what this process's namespace sees. A directory someone
// creates under a purge's exact tombstone name (token included, so they
// read the marker) after the tombstone was removed and before its marker
// was, and which gets the same inode number, would be taken for ours.
//
// # Host duties
//
//  1. Describe the node's disks in a DiskSet (node, name, path, expected
//     UUID and, if known, filesystem ID), and call DiskSet.Set when they
//     change. Give Disk.Path exactly as the node spec holds it, trailing
//     slash included (Longhorn's default is "/var/lib/longhorn/"): the
//     orphan name is a hash over that string, the DiskPath parameter and
//     the records carry it, and the Judge and Deleter compare a record's
//     path with the disk's as strings. Filesystem calls use the cleaned
//     path.
//  2. Provide an ExpectedSource: which data directory names the cluster
//     expects on each disk (replica spec.dataDirectoryName by spec.diskID).
//     StaticExpected holds a list; ParseReplicaList reads the JSON of
//     `kubectl get replicas.longhorn.io -n longhorn-system -o json`
//     (without -n it prints an empty list). Hand out the same NameSet
//     while nothing changed: rescans then skip the look-ups. An empty set
//     beside replica directories is reported (ScopeStatus.NoneExpected)
//     and refused at purge time; set Options.AllowNoneExpected only if the
//     host has confirmed by other means that nothing is expected.
//  3. Share that DiskSet and source between NewInventory, NewJudge and
//     NewDeleter, so the three agree on what each disk should be.
//  4. Scan periodically (orphan.Monitor), judge, plan and sweep
//     (orphan.Sweeper.Run), exactly as for any other orphan kind. The
//     snapshot's scope status carries OwnedUnlisted (the expected
//     directories, which are counted but not listed as items) and
//     NoneExpected, the evidence orphan's mass-deletion guard weighs.
//  5. Let Sweeper call FinishInterrupted (it does when the Deleter is a
//     Finisher), so purges a crash or a cancellation interrupted are
//     finished. Run it with /proc mounted (the mount checks need it).
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
// (DeleteReplicaDirectory in util/util.go), which descends into mounts;
// caretaker renames it to a marked tombstone first and never crosses a
// mount.
//
// # The loop
//
//	disks, _ := diskscan.NewDiskSet(diskscan.Disk{NodeID: node, Name: "disk-1", Path: "/var/lib/longhorn/", UUID: uuid})
//	expected := diskscan.NewStaticExpected(refs...)  // or your informer-backed ExpectedSource
//	inv := diskscan.NewInventory(disks, expected, diskscan.Options{})
//	mon := orphan.NewMonitor(inv, orphan.MonitorOptions{OnChange: func(orphan.Observation) { enqueue(node) }})
//	mon.Start(ctx)
//	defer mon.Stop()
//	sweeper := &orphan.Sweeper{
//		Store:   store, // your Orphan CRs, or orphan.NewMemStore()
//		Judge:   diskscan.NewJudge(disks, expected),
//		Deleter: diskscan.NewDeleter(disks, expected, diskscan.Options{}),
//	}
//	// in the node's reconcile:
//	if obs, ok := mon.Latest(); ok && obs.Err == nil {
//		plan, res, err := sweeper.Run(ctx, obs.Snapshot, orphan.Cycle{
//			Selector: orphan.Selector{NodeID: node},
//			Scopes:   evictions, // the host's own view: node or disk evicted, node down
//			Policy:   policy,    // orphan.ParsePolicy(setting, gracePeriod)
//		})
//		// log plan, res.Refused and err; inv.LastReport() has sizes and reasons.
//	}
//
// # Incremental scans
//
// The Inventory keeps the last listing of each disk. Expected directories
// are never stat'ed or read. An unexpected directory's volume.meta is read
// when the directory is new or its inode, mtime or ctime changed (the
// engine writes volume.meta.tmp and renames it, which changes the
// directory's mtime), or when it changed within RacyWindow of the last
// scan. An unchanged rescan of a disk with 100k replica directories costs
// one directory listing and one lstat per unexpected directory. The cache
// only shapes reports: the Deleter re-checks everything on disk itself.
//
// # Errors
//
// Parsers return *ParseError wrapping ErrCorrupt, ErrTooLarge or
// ErrNotRegular; every read is bounded (Options, DefaultMaxMetaSize,
// DefaultMaxConfigSize, DefaultMaxReplicaListSize). Inventory.Scan fails
// only with its context's error: a disk's trouble is its scope's health
// (DiskInvalid, DiskChanged, Unknown when its replicas cannot be listed or
// the expected source fails), and an entry's trouble is an orphan.Skipped
// with the reason. Deleter.Delete refuses with an error wrapping
// orphan.ErrPreconditionFailed and one of ErrUnsafePath, ErrNotReplica,
// ErrDiskChanged, ErrDiskInvalid, ErrUnknownDisk, ErrStillExpected,
// ErrNoneExpected or ErrMountPoint; if the refusal came before the
// rename nothing was touched, and after it the directory was renamed back
// (ErrMountPoint met by the removal walk itself leaves the marked
// tombstone, and the mount, for later). An error wrapping ctx's error
// means the purge stopped and left a marked tombstone. Data already gone
// is success. FinishInterrupted reports look-alike tombstones with
// ErrForeignTombstone. Other errors (I/O, the expected source failing)
// are retryable on the next sweep.
//
// # Concurrency
//
// DiskSet, StaticExpected, Judge and Deleter are safe for concurrent use.
// Inventory serialises its scans; LastReport may be called at any time.
// The Deleter may purge different records at once; the Sweeper never
// purges one record twice at once.
package diskscan
