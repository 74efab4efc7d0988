// Package spdktest provides a fake SPDK target for tests: a JSON-RPC 2.0
// server on a real Unix socket that keeps state (lvstores, lvols with
// snapshot and clone trees, RAID bdevs), answers the methods packages spdk
// and spdkrpc use with SPDK's JSON shapes and error codes, and injects faults (slow
// replies, garbage, a reply cut mid-way, a dropped connection, a
// well-formed reply with a result of the wrong shape, an object recreated
// between a list and a delete).
//
// It also holds the conformance suite of package spdkrpc's host-facing
// interface: RunConformanceTests checks a spdkrpc.Caller (spdkrpc.Client, or a
// host's own) against SPDK's JSON-RPC contract over this server.
//
// Replies are package spdkrpc's wire types, spelled as SPDK's writers spell
// them, with what SPDK writes besides for other clients: the fake is a
// drop-in target for Longhorn's go-spdk-helper client too (its
// BdevLvolGet, BdevAioGet, BdevRaidGet, BdevLvolGetLvstore and
// BdevRaidGetInfoByCategory decode these replies; the golden tests in
// testdata hold them to SPDK's documented shapes). Methods served:
// bdev_get_bdevs (lvstores' AIO base bdevs, lvols with Longhorn's
// creation_time, RAID bdevs), bdev_lvol_get_lvstores,
// bdev_lvol_get_lvols, bdev_raid_get_bdevs, bdev_lvol_delete,
// bdev_raid_delete, bdev_lvol_get_xattr, bdev_lvol_set_xattr and
// bdev_lvol_get_snapshot_checksum (Longhorn's SPDK); and for NVMe-oF,
// nvmf_get_subsystems (the discovery subsystem first), nvmf_create_subsystem,
// nvmf_delete_subsystem, nvmf_subsystem_add_ns, nvmf_subsystem_remove_ns,
// nvmf_subsystem_add_listener, nvmf_subsystem_remove_listener,
// nvmf_subsystem_get_listeners,
// bdev_nvme_attach_controller, bdev_nvme_get_controllers and
// bdev_nvme_detach_controller, with NVMe bdevs ("<controller>n1") in
// bdev_get_bdevs. State is built through the Go API (AddLvstore, AddLvol,
// Snapshot, Clone, AddRaid, SetLvolXattr, SetSnapshotChecksum,
// AddSubsystem, AddNamespace, AddListener, AddHost, AttachController,
// SetControllerState) or those RPCs, with SPDK's semantics: a snapshot
// takes its lvol's place under the lvol's parent, and deleting a snapshot
// with one clone re-parents the clone; a namespace claims its bdev (a
// claimed bdev cannot be exposed) and is listed under the bdev's name (an
// lvol's UUID) with the bdev's UUID; deleting a bdev never fails for
// being exposed or a RAID member: its namespaces are hot-removed and its
// RAID slots emptied, as SPDK's remove event does. bdev_get_bdevs takes a
// timeout but never waits: a bdev the fake does not have will not appear.
//
// # Host duties
//
//  1. Start a Server on a short socket path (Unix socket paths are limited
//     to about 100 bytes; t.TempDir can be longer) and Close it.
//  2. Build the state, point an spdkrpc.Client at SocketPath.
//  3. Inject faults before the calls they should hit (by method, and by
//     params when one method is called for different purposes); assert
//     with Calls, CallCount, Lvols, LvolAliases, RaidNames, Subsystems and
//     ControllerNames. Fault
//     delays follow Options.Clock, so a test with a fake clock decides
//     when a delayed reply leaves.
//
// A complete test:
//
//	srv, err := spdktest.Start(filepath.Join(dir, "spdk.sock"), spdktest.Options{})
//	if err != nil { t.Fatal(err) }
//	defer srv.Close()
//	srv.AddLvstore("disk-1")
//	srv.AddLvol("disk-1", "vol-r-1234abcd")
//	srv.Snapshot("disk-1", "vol-r-1234abcd", "vol-r-1234abcd-snap-s1")
//	srv.Inject(spdktest.Fault{Method: "bdev_lvol_get_lvols", Then: func() {
//		srv.RecreateLvol("disk-1", "vol-r-1234abcd") // the UUID changes after the listing
//	}})
//	c, err := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: srv.SocketPath()})
//	if err != nil { ... }
//	defer c.Close()
//	// ... scan with spdk.NewOrphans, then purge: the judge finds the item's
//	// UUID gone, and a purge of its record refuses with spdk.ErrUUIDMismatch.
//
// # Errors
//
// The server answers like SPDK (each code and message is taken from the
// handler in SPDK's source, named where the fake implements it):
// -32700 (and a dropped connection) for unparsable input; -32600 for a
// request that is not a JSON-RPC 2.0 request, or whose params are neither
// an object nor an array; -32601 for an unknown method; params SPDK's
// decoder rejects (not an object, an unknown or mistyped member, a
// required one missing) are "spdk_json_decode_object failed", -32603 for
// the lvol methods and bdev_get_bdevs, -32700 for the RAID methods;
// -22 "Invalid argument" for bdev_lvol_get_lvstores or
// bdev_lvol_get_lvols naming both or neither of an lvstore's UUID and
// name, and for an unknown RAID category; -19 "No such device" for a
// missing lvol, lvstore or bdev, a snapshot without a registered checksum
// included, and "raid bdev <name> not found" for a missing RAID bdev;
// -32603 "No such file or directory" for an xattr the lvol does not have;
// -32603 "Operation not permitted" when deleting an lvol with more than
// one clone. The NVMe-oF subsystem methods (lib/nvmf/nvmf_rpc.c) answer
// -32602 "Invalid parameters" for params their decoder rejects and for an
// unknown NQN, NSID, bdev or listener alike; nvmf_get_subsystems answers
// an unknown NQN -19; a tgt_name other than "nvmf_tgt" is -32603 "Unable
// to find a target.". The NVMe bdev methods (module/bdev/nvme) answer a
// decoder failure -32603 "spdk_json_decode_object failed", a bad trtype
// or adrfam -22, bdev_nvme_get_controllers an unknown name 22 (positive)
// "Controller <name> does not exist", bdev_nvme_detach_controller an
// unknown name -19 and a path matching none -6, and
// bdev_nvme_attach_controller an existing path -114. The state-building
// methods return errors wrapping ErrExists or ErrNotFound (the library's
// one NotFound class).
//
// # Concurrency
//
// All methods of Server are safe for concurrent use. Requests on one
// connection are handled concurrently, each answered as soon as it is
// done, so replies can come out of order as they can from SPDK's
// asynchronous handlers. Object UUIDs come from a deterministic sequence
// unless Options.NewUUID says otherwise, so output built on them is stable.
// Close waits for every connection and handler to finish.
package spdktest
