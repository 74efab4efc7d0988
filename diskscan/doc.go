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
// # Host duties
//
//  1. Describe the node's disks in a DiskSet (node, name, path, expected
//     UUID and, if known, filesystem ID), and call DiskSet.Set when they
//     change.
//  2. Provide an ExpectedSource: which data directory names the cluster
//     expects on each disk (replica spec.dataDirectoryName by spec.diskID).
//     StaticExpected holds a list; ParseReplicaList reads the JSON of
//     `kubectl get replicas.longhorn.io -o json`. Hand out the same NameSet
//     while nothing changed: rescans then skip the look-ups.
//  3. Share that DiskSet and source between NewInventory, NewJudge and
//     NewDeleter, so the three agree on what each disk should be.
//  4. Scan periodically (orphan.Monitor), judge, plan and sweep
//     (orphan.Sweeper.Run), exactly as for any other orphan kind.
//  5. Let Sweeper call FinishInterrupted (it does when the Deleter is a
//     Finisher), so purges a crash interrupted are finished.
//
// # The loop
//
//	disks, _ := diskscan.NewDiskSet(diskscan.Disk{NodeID: node, Name: "disk-1", Path: "/var/lib/longhorn", UUID: uuid})
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
// Parsers return *ParseError wrapping ErrCorrupt or ErrTooLarge; every
// read is bounded (Options, DefaultMaxMetaSize, DefaultMaxConfigSize,
// DefaultMaxReplicaListSize). Inventory.Scan fails only with its context's
// error: a disk's trouble is its scope's health (DiskInvalid, DiskChanged,
// Unknown when its replicas cannot be listed or the expected source
// fails), and an entry's trouble is an orphan.Skipped with the reason.
// Deleter.Delete refuses with an error wrapping orphan.ErrPreconditionFailed
// and one of ErrUnsafePath, ErrNotReplica, ErrDiskChanged, ErrDiskInvalid,
// ErrUnknownDisk, ErrStillExpected; nothing was deleted. Data already gone
// is success. Other errors (I/O, the expected source failing) are
// retryable on the next sweep.
//
// # Concurrency
//
// DiskSet, StaticExpected, Judge and Deleter are safe for concurrent use.
// Inventory serialises its scans; LastReport may be called at any time.
// The Deleter may purge different records at once; the Sweeper never
// purges one record twice at once.
package diskscan
