// Package s3store is a backupstore in an S3 bucket (AWS S3 or an
// S3-compatible store) in Longhorn's object layout, with Longhorn's lock
// protocol on lock objects: point it at the target Longhorn backs up to,
// and it deletes backups interoperably with Longhorn's own backupstore
// module, in far fewer requests. Store implements
// backupdelete.Backupstore and backupdelete.CompletedBackupDeleter, passes
// backupstoretest.RunConformanceTests, and has fsstore.Store's reading and
// writing methods (WriteVolume, WriteBackup, WriteBlock, Lock, Volumes,
// Backups, ReadVolume, ReadBackup, BlockFiles), so the two stores are
// interchangeable.
//
// # In short
//
//	cfg := s3store.OptionsFromEnv("s3://backups@us-east-1/longhorn", os.Getenv) // Longhorn's backup-target secret variables
//	store, err := s3store.New(cfg)
//	err = store.Check(ctx) // endpoint, credentials and bucket, as Longhorn checks them on load
//	drv, err := backupdelete.NewDriver(store, backupdelete.DriverOptions{}) // drv.Reconcile(ctx, req) per backup the user deletes
//
// It is built on aws-sdk-go-v2's service/s3 client with the aws and
// credentials packages only: the SDK's config package is left out because
// it reads the process environment and shared files (~/.aws) itself,
// which would bypass the Options, and pulls in STS, SSO and IMDS clients
// a backup target does not use.
//
// # Target and credentials
//
// The target URL is Longhorn's, s3://bucket@region/path (or
// s3://bucket/path with the region from AWS_REGION), parsed as
// longhorn/backupstore s3/s3.go initFunc parses it (ParseURL). The
// credentials and settings are the variables of Longhorn's backup-target
// secret (OptionsFromEnv reads them through a getenv function, never the
// process environment by itself): AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_ENDPOINTS (a custom
// endpoint), AWS_CERT (extra PEM CA certificates), VIRTUAL_HOSTED_STYLE,
// HTTP_PROXY, HTTPS_PROXY and NO_PROXY. As Longhorn's s3_service.go
// newInstance decides: with a custom endpoint, requests are path-style
// unless VIRTUAL_HOSTED_STYLE is "true"; on AWS virtual-hosted style
// unless it is "false". New checks everything before any request;
// Store.Check lists the prefix once, as Longhorn's driver does when it
// loads. No credential is ever in an error, a log line or Stats: the
// secret, the session token and the access key ID are redacted from every
// text the server or the SDK hands back.
//
// # Layout
//
// Keys are Longhorn's filesystem paths (see package fsstore; the format
// code is shared, so both stores write the same bytes) joined to the
// target's path as longhorn/backupstore s3/s3.go updatePath joins them
// (path.Join: no leading slash, none doubled, none trailing); a directory
// is listed as its key plus "/" with the delimiter "/", as Longhorn's
// List does ("Directory must end in "/" in S3", s3_service.go
// ListObjects). Objects are written whole with one PutObject, as
// Longhorn's Write does for cfgs and blocks (PutObjectAsSinglePart); S3
// replaces an object atomically, so the temporary names and renames of a
// filesystem are not needed, and there are no directories to create or
// remove.
//
// # Deletion
//
// Store.DeleteBackup follows fsstore's order, which is Longhorn's
// DeleteDeltaBlockBackup's, under a deletion lock: read volume.cfg; read
// the backup's cfg (its blocks are the candidates); list the remaining
// backups and check the listing (see "Listings that lie" below); delete
// the cfg; read every remaining cfg (in-progress ones included);
// list the backups again and compare; delete the candidates no remaining
// backup references; rewrite volume.cfg (LastBackupName, LastBackupAt,
// BlockCount, every other member byte for byte). No block is deleted if a
// remaining backup is in progress or unreadable, or if the backup list
// changed; LastBackupName is then cleared rather than guessed, as
// Longhorn does.
//
// Requests: a deletion of one backup of a volume with n remaining backups
// and k unreferenced candidates costs 12 + n + ceil(k/1000) requests
// (Stats counts them; TestDeleteTargeted asserts the 15 of n = 2, k = 1),
// plus a GetObject per other lock object and a listing per further 1000
// backups: PutObject, ListObjectsV2 and GetObject of the lock, PutObject
// when acquired, DeleteObject at release; GetObject of volume.cfg and of
// the cfg, DeleteObject of the cfg, two listings of backups/ and one of
// the keys past the first listing's end, n
// GetObjects, the DeleteObjects batches, and PutObject of volume.cfg.
// Longhorn lists every block of the volume (one request per 1000) and
// deletes each unreferenced block with its own DeleteObject. Batches are
// of up to 1000 keys (S3's limit), each key's error checked; a server that answers DeleteObjects with
// NotImplemented (Google Cloud Storage's S3 interoperability API, the
// reason Longhorn deletes one object per request: longhorn/longhorn#1594)
// gets single deletes, Options.DeleteConcurrency at a time, and the Store
// remembers it (Stats.MultiDeleteUnsupported).
//
// The collection is the same code as fsstore's (one algorithm over a
// storage interface each store implements); what differs is stated as a
// choice of each store, and why:
//
//   - Only the deleted backup's blocks are candidates, by default on every
//     deletion: fsstore also lists every block file on a Store's first
//     deletion in a volume, which on S3 costs a request per 1000 blocks
//     and would make a deletion cost as much as Longhorn's. Every block
//     object of the volume is listed when the deleted cfg is gone or
//     unparsable (a retry), when it is in progress (an abandoned backup:
//     its cfg lists none of the blocks it uploaded), after a collection of
//     this Store in the volume that removed a cfg and did not finish or
//     skipped its blocks, with Options.FullCollection, and by
//     CollectBlocks.
//   - volume.cfg's new BlockCount is always counted from the remaining
//     backups, as Longhorn counts it (fsstore derives it from the old
//     count in a targeted collection, which saves it work that costs S3
//     no request).
//
// Both stores read volume.cfg first, so that a volume with neither it nor
// the cfg is "already gone" without a write, and a backup whose volume.cfg
// is missing is corrupt before anything is deleted; and a read of the
// deleted cfg that fails for any reason but its absence or its content (a
// 503 storm, a dropped connection, a truncated body) stops the deletion
// before anything is deleted: it says nothing about the cfg.
//
// # Listings that lie
//
// Block collection is only as right as the listing of backups/: a
// backup it leaves out is a backup whose blocks are deleted, and that
// backup can no longer be restored. Longhorn's DeleteDeltaBlockBackup
// (longhorn/backupstore deltablock.go, getBackupNamesForVolume) trusts
// the listing as complete, so a gateway, cache or proxy that drops an
// entry, or answers a full page marked not truncated, makes it delete
// referenced blocks. This Store checks the listing before it deletes
// anything, the backup's cfg included:
//
//   - the backup volume.cfg names as its last (LastBackupName) must be
//     listed, unless it is the one being deleted, LastBackupName is
//     empty, or a HeadObject of its cfg (a lookup by key, not a listing)
//     finds it gone: a deletion removed it and died before rewriting
//     volume.cfg, a state Longhorn's own deletion leaves too;
//   - a listing whose last page holds exactly Options.ListPageSize keys
//     and is marked complete is listed again in pages half as large (of 2
//     keys when pages hold 1) and must find the same backups;
//   - the first listing of a deletion is proven to end where it says: a
//     listing of the keys after its last key (StartAfter) must find no
//     object. A gateway that cuts listings at its own limit, below the
//     page size, and marks them complete is caught there; one that
//     ignores StartAfter answers keys that are not after it, which is
//     ErrMalformed. The deletion's later listing must equal the first.
//
// A contradiction is an error wrapping backupdelete.ErrListingInconsistent
// and nothing is deleted: the backup stays, the Driver keeps it in Error
// and retries after its backoff, and the retry finishes once the listing
// is honest. A LastBackupName that is not a valid backup name cannot be
// checked: volume.cfg is corrupt (backupdelete.ErrCorrupt) and nothing is
// deleted. The re-listing after the scan that finds a page cut short
// fails the same way, after the cfg was deleted: the backup is then gone
// and the Driver's CollectVolume, which fails until the listing is
// honest, keeps it Deleting until its blocks are collected. What this
// does not catch: a listing that drops a backup other than the last one
// from its middle is trusted, as Longhorn trusts it. volume.cfg's BlockCount is not a check: Longhorn
// adds each backup's new blocks to it and deletion sets it to the blocks
// it found referenced, so it drifts from the truth (a full backup's
// re-uploaded blocks are not counted, a skipped collection leaves it
// stale) and a mismatch would refuse legitimate volumes. The checks cost
// one listing past the end per deletion when they pass, plus a listing
// in smaller pages when the last page is exactly full, and a HeadObject
// when LastBackupName is not listed.
//
// # Crash safety
//
// A deletion interrupted at any request leaves a state the same deletion
// finishes: before the cfg's DeleteObject nothing is changed; after it,
// the retry finds the cfg gone and lists every block object (nothing the
// remaining backups reference is a candidate, whatever the listing finds);
// a DeleteObjects batch deletes or leaves each key whole; volume.cfg is
// replaced whole. Nothing referenced is ever deleted: every deletion
// decision is made under the deletion lock after all remaining cfgs were
// read and the backup list was found unchanged, and no backup writer
// holds its lock meanwhile.
//
// One window is wider than on a filesystem. When the process dies (or
// the server goes away) after the cfg's DeleteObject and before the
// blocks', the backup is gone and the blocks only it referenced stay.
// The Driver finishes such a deletion: Store implements
// backupdelete.Collector, so before the Driver finalizes a backup whose
// deletion it did not see succeed (no record after a restart, once per
// volume; or a failed command) it calls CollectVolume, which lists every
// block object of the volume and collects the unreferenced ones, and it
// keeps the backup Deleting until that succeeds. The same Store's next
// deletion in the volume also lists them (it remembers the unfinished
// collection), and so does Longhorn's own next deletion, which lists
// every block. A host that deletes without the Driver runs CollectBlocks
// on the volumes of interrupted deletions, or on a schedule.
//
// # Locks
//
// Lock objects are locks/lock-<16 hex>.lck holding {"Name","Type",
// "Acquired"}, with Longhorn's types, timing, ranking and expiry (shared
// with fsstore; longhorn/backupstore lock.go). A lock's time is its
// object's Last-Modified (Longhorn's FileTime reads it with a
// HeadObject); we take it from the listing, cut to the second, which is
// the same value at the HEAD header's one-second precision and one
// request fewer per lock. Expiry compares Options.Clock with the server's
// Last-Modified, as Longhorn compares its node's clock: a node clock
// ahead of the server's by more than LockExpiry - LockRefresh (90 s) sees
// live locks as expired, so keep the hosts' clocks synchronised. Longhorn skips a lock object it cannot read;
// we skip one we cannot parse, but one we cannot read (a 503, a dropped
// connection) fails the look: skipping a live lock because the server
// hiccuped would let two exclusive takers proceed. A deletion runs under
// its lock's Context: when no rewrite of the lock object has succeeded for
// LockHeldFor (90 s: LockExpiry less a minute for clock skew and requests
// in flight), the lock may soon look expired to others (a backup that
// reuses a block the deletion is about to delete could start), so the
// deletion stops with ErrLockLost and deletes nothing more; the Driver
// retries it. Longhorn's deletion goes on regardless. A lock is refreshed
// until Release or until the taker's context ends; Release deletes the
// object with the taker's context freed of its cancellation
// (context.WithoutCancel), within RequestTimeout or 5 s, whichever is
// shorter, so that a cancelled deletion does not hold backups back for
// LockExpiry and returns at most that long after its context ended. That
// DeleteObject is the one request sent after a cancellation.
//
// Consistency. The protocol works if a taker's listing, LockSettle (2 s)
// after it wrote its own lock, shows every lock written before that
// listing: two takers racing then see each other and the rank decides. AWS
// S3 has had strong read-after-write and list-after-write consistency
// since December 2020, so there it holds. An S3-compatible store whose
// listings may lag its writes (some Ceph RGW multi-site setups, older
// gateways, caches in front of a store) breaks Longhorn's protocol as
// much as ours if the lag exceeds the settle time; the settle time is
// Longhorn's constant and cannot be raised without breaking interop. A
// Store refuses to proceed when its own lock is missing from the listing
// (the visible symptom of such a lag), and the deletion's second listing
// of the backups guards the block decision the same way. BackupExists
// lists the cfg's key rather than asking HeadObject, whose 404 cannot
// tell a missing object from a missing bucket.
//
// # Requests
//
// Every request carries the caller's context and Options.RequestTimeout;
// none is sent once the context has ended (but Release's, above). 503
// SlowDown, 500s, timeouts, dropped and refused connections are retried
// with internal/backoff (Options.RetryInitial doubling to RetryMax, at
// most MaxAttempts attempts), the waits on Options.Clock; the SDK's own
// retryer is off. Every listing is paginated (Options.ListPageSize), its
// pages checked (keys inside the prefix, a continuation token that
// advances, the bucket named, at most Options.MaxListPages pages); every
// object read is bounded
// (MaxConfigBytes for cfgs, 64 KiB for locks) and checked against its
// Content-Length; every other response body is bounded by
// MaxResponseBytes. Redirects are never followed.
//
// # Host duties
//
//  1. Build an Options (OptionsFromEnv with the backup-target secret's
//     lookup) and New; call Check once to fail early on a wrong
//     endpoint, credentials or bucket.
//  2. Pass the Store to backupdelete.NewDriver and, for failed backups, to
//     backupdelete.NewOrphans.
//  3. If you also create backups, take Store.Lock(ctx, volume, LockBackup)
//     around writing blocks and the cfg, and release it.
//  4. After a crash, or on a schedule, run CollectBlocks on the volumes
//     whose deletions were interrupted.
//
// # A complete loop
//
//	store, err := s3store.New(s3store.OptionsFromEnv("s3://backups@us-east-1/longhorn", os.Getenv))
//	if err != nil {
//		return err
//	}
//	if err := store.Check(ctx); err != nil {
//		return err // wrong endpoint, credentials, bucket: a *RequestError
//	}
//	c, err := store.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0123456789abcdef"})
//	fmt.Println(c.Removed, "blocks removed", err, store.Stats())
//
// # Errors
//
// ErrConfig (as *ConfigError) from New and ParseURL. A request that
// failed is a *RequestError naming the operation, the key, the HTTP status
// and S3 code, wrapping one class: ErrAccessDenied, ErrNoSuchBucket,
// ErrRedirect, ErrUnreachable, ErrUnavailable (retries exhausted),
// ErrNotImplemented, ErrMalformed and ErrTooLarge (both also
// backupdelete.ErrCorrupt), or ErrRequest; a missing object also wraps
// backupdelete.ErrNotFound. Lock conflicts are *LockConflictError
// (backupdelete.ErrLocked) and a backup in progress *BackupRunningError
// (backupdelete.ErrInProgress), the same types as fsstore's; corrupt cfgs wrap
// backupdelete.ErrCorrupt; invalid names backupdelete.ErrInvalidRef; a
// cancelled context its own error.
//
// # Concurrency
//
// A Store is safe for concurrent use. Deletions in one volume coordinate
// through lock objects exactly as separate processes (or Longhorn itself)
// would; two deletions are compatible, and each only deletes blocks that
// none of the backups it read references.
package s3store
