package fsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"k8s.io/utils/clock"
)

// Options configure a Store. The zero value is the documented defaults.
type Options struct {
	// Clock times the lock protocol (the settle wait, lock expiry, refresh,
	// waiting for a conflicting lock); default the real clock.
	Clock clock.Clock
	// LockWait is how long a deletion waits for a conflicting lock (a
	// backup or restore running on the volume) before failing with
	// backupdelete.ErrLocked. Zero fails after the first look, about
	// LockSettle after the attempt, exactly as Longhorn's FileLock.Lock
	// does; waiting is caretaker's own option. A wait longer than
	// LockRefresh rewrites our waiting lock file every LockRefresh, so that
	// it never looks expired to others while we still count its rank
	// (otherwise a taker that saw our lock as expired and we, who still
	// ranked it first, could both proceed).
	LockWait time.Duration
	// LockCheckInterval is how often a waiting taker looks again; default
	// 10 s.
	LockCheckInterval time.Duration
	// MaxConfigBytes bounds the size of a cfg file read; a larger one is
	// corrupt. Default 256 MiB (a 1 TiB volume of 2 MiB blocks has a
	// ~50 MiB backup cfg).
	MaxConfigBytes int64
	// FullCollection makes every deletion list all block files of the
	// volume, as Longhorn does. By default a Store lists them (collecting
	// blocks leaked by earlier skipped or interrupted collections, ours or
	// Longhorn's) on its first deletion in a volume, and after any
	// collection of its own in that volume that was skipped or failed, or
	// when the deleted cfg is already gone or unreadable; otherwise only
	// the deleted backup's blocks are candidates, which is what keeps
	// collection close to the cost of the unlinks themselves.
	FullCollection bool
}

// DefaultMaxConfigBytes is Options.MaxConfigBytes's default.
const DefaultMaxConfigBytes = 256 << 20

// Store is a backupstore on a filesystem, in Longhorn's layout, under a
// mount point (an NFS or CIFS mount, or a local directory). It implements
// backupdelete.Backupstore. All file access is confined to the mount point
// with os.Root: no symlink leads out of it.
//
// A Store is safe for concurrent use; concurrent deletions in one volume
// coordinate through the lock files, like separate processes would.
type Store struct {
	root  *os.Root
	opts  Options
	clock clock.Clock

	mu sync.Mutex
	// swept holds the volumes in which this Store completed a full
	// collection and every collection since: no block can have leaked
	// through us, so the deleted backup's blocks are the only candidates.
	swept map[string]bool
}

// Open opens the backupstore mounted at dir (the directory that holds
// "backupstore/"). The directory must exist.
func Open(dir string, opts Options) (*Store, error) {
	// Opening a FIFO blocks; the mount point's type is checked first (it
	// may be a symlink to a directory: the host chose the path).
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("fsstore: open %s: %w", dir, err)
	}
	if !info.IsDir() {
		return nil, &FileTypeError{Path: dir, Mode: info.Mode(), Want: "directory"}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("fsstore: open %s: %w", dir, err)
	}
	c := opts.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	if opts.MaxConfigBytes <= 0 {
		opts.MaxConfigBytes = DefaultMaxConfigBytes
	}
	return &Store{root: root, opts: opts, clock: c, swept: map[string]bool{}}, nil
}

// Close releases the mount point's handle.
func (s *Store) Close() error { return s.root.Close() }

// BackupExists reports whether the backup's cfg is in the backupstore
// (in progress or not). See backupdelete.Backupstore.
func (s *Store) BackupExists(ctx context.Context, ref backupdelete.BackupRef) (bool, error) {
	if err := ref.Validate(); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	_, err := s.root.Stat(path.Join(VolumePath(ref.Volume), backupCfgPath(ref.Name)))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("fsstore: stat backup %s: %w", ref, err)
	}
}

// DeleteBackup deletes a backup and collects its blocks. See
// backupdelete.Backupstore and DeleteBackupReport.
func (s *Store) DeleteBackup(ctx context.Context, ref backupdelete.BackupRef) error {
	_, err := s.DeleteBackupReport(ctx, ref)
	return err
}

// Collection says what a deletion did to the volume's blocks.
type Collection struct {
	// Removed is the number of block files unlinked.
	Removed int
	// Referenced is the number of distinct blocks the remaining backups
	// reference (volume.cfg's new BlockCount when blocks were collected).
	// A targeted collection derives it from the old BlockCount (see
	// collect) and leaves it 0 when skipped.
	Referenced int
	// Full: every block file of the volume was a candidate (not only the
	// deleted backup's).
	Full bool
	// Skipped is why no block was removed, or "".
	Skipped string
}

// DeleteBackupReport deletes a backup under a deletion lock, exactly in
// Longhorn's order: remove backups/backup_<name>.cfg; list and read every
// remaining backup cfg to find the blocks still referenced and the latest
// backup; list the backups again and compare; unlink the unreferenced
// candidate blocks; update volume.cfg (LastBackupName, LastBackupAt,
// BlockCount). No block is unlinked if any remaining backup is in progress
// or unreadable, or if the backup list changed during the collection; the
// cfg removal stands and a later deletion collects those blocks.
//
// A volume or backup that is already gone is success: the cfg removal is
// skipped and the blocks are still collected, so a retry after a partial
// deletion finishes the job.
func (s *Store) DeleteBackupReport(ctx context.Context, ref backupdelete.BackupRef) (Collection, error) {
	return s.deleteBackup(ctx, ref, false)
}

// DeleteCompletedBackup is DeleteBackup for a backup whose creation has
// finished: under the deletion lock (which no backup creator holds at the
// same time), before anything is removed, it reads the backup's cfg and
// deletes nothing if the cfg has an empty CreatedTime (an error wrapping
// backupdelete.ErrInProgress) or cannot be read (a FIFO or anything but a
// regular file: ErrFileType; unparsable or oversized: ErrCorrupt; an I/O
// error as it is). A cfg that is already gone is success, and the blocks
// are still collected. See backupdelete.CompletedBackupDeleter.
func (s *Store) DeleteCompletedBackup(ctx context.Context, ref backupdelete.BackupRef) error {
	_, err := s.deleteBackup(ctx, ref, true)
	return err
}

func (s *Store) deleteBackup(ctx context.Context, ref backupdelete.BackupRef, requireComplete bool) (Collection, error) {
	if err := ref.Validate(); err != nil {
		return Collection{}, err
	}
	vol, err := openDir(s.root, VolumePath(ref.Volume))
	if errors.Is(err, fs.ErrNotExist) {
		return Collection{}, nil
	}
	if err != nil {
		return Collection{}, fmt.Errorf("fsstore: open volume %s: %w", ref.Volume, err)
	}
	defer vol.Close()

	// The lock stops being refreshed when the deletion returns or ctx
	// ends, whichever comes first: a deletion stuck past its context does
	// not hold the volume for longer than LockExpiry (and, cancelled, it
	// unlinks nothing more: see removeBlocks).
	lock, err := s.acquire(ctx, vol, ref.Volume, LockDeletion, ctx.Done())
	if err != nil {
		return Collection{}, fmt.Errorf("fsstore: delete backup %s: %w", ref, err)
	}
	defer lock.Release()

	c, err := s.collect(ctx, vol, ref, requireComplete)
	if err != nil {
		return c, fmt.Errorf("fsstore: delete backup %s: %w", ref, err)
	}
	return c, nil
}

// collect is the deletion proper, under the lock.
func (s *Store) collect(ctx context.Context, vol *os.Root, ref backupdelete.BackupRef, requireComplete bool) (c Collection, err error) {
	s.mu.Lock()
	targeted := !s.opts.FullCollection && s.swept[ref.Volume]
	s.mu.Unlock()
	defer func() {
		// Only a complete collection vouches for the next targeted one.
		s.mu.Lock()
		s.swept[ref.Volume] = err == nil && c.Skipped == "" && (c.Full || s.swept[ref.Volume])
		s.mu.Unlock()
	}()
	// Longhorn goes on when the cfg cannot be read: the cfg still goes, and
	// the blocks are found by listing.
	// candidates are the deleted backup's blocks (slices of its cfg's
	// bytes, possibly repeated); nil means "list every block file".
	var candidates [][]byte
	data, _, readErr := readBounded(vol, backupCfgPath(ref.Name), s.opts.MaxConfigBytes)
	if requireComplete && !errors.Is(readErr, fs.ErrNotExist) {
		if readErr != nil {
			return c, fmt.Errorf("read %s: %w", backupCfgPath(ref.Name), readErr)
		}
		refs, err := scanBackup(data)
		if err != nil {
			return c, err
		}
		if refs.createdTime == "" {
			return c, fmt.Errorf("%w: %s has an empty CreatedTime", backupdelete.ErrInProgress, backupCfgPath(ref.Name))
		}
	}
	if readErr == nil && targeted {
		if refs, err := scanBackup(data); err == nil {
			candidates = refs.checksums
			if candidates == nil {
				candidates = [][]byte{}
			}
		}
	}
	// Only a regular file is a cfg: anything else at its name (a FIFO, a
	// directory, a symlink) stops the deletion before it removes anything.
	if err := checkRegularOrAbsent(vol, backupCfgPath(ref.Name)); err != nil {
		return c, err
	}
	if err := vol.Remove(backupCfgPath(ref.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return c, fmt.Errorf("remove %s: %w", backupCfgPath(ref.Name), err)
	}

	volRaw, volCfg, err := s.readVolumeRaw(vol)
	if err != nil {
		return c, err
	}
	updateLast := volCfg.LastBackupName == ref.Name

	names, err := listBackupNames(vol)
	if err != nil {
		return c, err
	}
	// A targeted collection only needs to know which candidates the
	// remaining backups reference: the scanners mark them in an index of
	// the candidates, and the new BlockCount is the old one less the
	// distinct candidates left unmarked (what the deleted backup alone
	// referenced), the way Longhorn's backup creation adds its new blocks
	// to it. That saves building the set of every referenced block, which
	// costs more than the unlinks. Without an old BlockCount, or when the
	// result is less than the candidates still referenced (so the old
	// count was not that of the distinct referenced blocks), the
	// referenced set is built after all. Full collections always build it.
	var (
		idx        *candidateIndex
		referenced *blockSet
		add        func([][]byte)
	)
	oldCount, haveOld := blockCountOf(volRaw)
	if candidates != nil && haveOld {
		idx = newCandidateIndex(candidates)
		add = idx.mark
	} else {
		referenced = newBlockSet()
		add = referenced.addAll
	}
	latest, skipped, err := checkScans(names, s.scanAll(ctx, vol, names, add), updateLast)
	if err != nil {
		return c, err
	}
	c.Skipped = skipped
	if idx == nil {
		c.Referenced = referenced.len()
	} else if c.Skipped == "" {
		c.Referenced = oldCount - idx.unmarked()
		if c.Referenced < idx.marked() {
			// The old BlockCount cannot have been the distinct blocks
			// referenced before this deletion: count them all.
			referenced = newBlockSet()
			_, skipped, err := checkScans(names, s.scanAll(ctx, vol, names, referenced.addAll), false)
			if err != nil {
				return c, err
			}
			c.Skipped = skipped
			c.Referenced = referenced.len()
			if c.Skipped != "" {
				c.Referenced = 0
			}
		}
	}

	testHookBeforeRelist()
	if c.Skipped == "" {
		again, err := listBackupNames(vol)
		if err != nil || !sameSet(names, again) {
			c.Skipped = "backup list changed during collection"
		}
	}

	if c.Skipped == "" {
		var unref []string
		switch {
		case idx != nil:
			// Unmarked by the scan, and absent from the recount if
			// there was one.
			for i, ck := range idx.cks {
				if !idx.marks[i].Load() && (referenced == nil || !referenced.has([]byte(ck))) {
					unref = append(unref, ck)
				}
			}
		default:
			if candidates == nil {
				c.Full = true
				all, err := listBlocks(vol)
				if err != nil {
					return c, err
				}
				for ck := range all {
					candidates = append(candidates, []byte(ck))
				}
			}
			seen := map[string]struct{}{}
			for _, ck := range candidates {
				if referenced.has(ck) {
					continue
				}
				if _, dup := seen[string(ck)]; !dup {
					seen[string(ck)] = struct{}{}
					unref = append(unref, string(ck))
				}
			}
		}
		removed, failed := removeBlocks(ctx, vol, unref)
		c.Removed = removed
		if err := ctx.Err(); err != nil {
			return c, err
		}
		if len(failed) > 0 {
			slices.Sort(failed)
			return c, fmt.Errorf("failed to remove %d blocks (first %s)", len(failed), failed[0])
		}
	}

	changed := false
	if updateLast {
		// As Longhorn: when blocks were not collected, the last backup is
		// cleared rather than guessed.
		last, at := "", ""
		if c.Skipped == "" {
			last, at = latest.name, latest.at
		}
		lastJSON, _ := json.Marshal(last)
		atJSON, _ := json.Marshal(at)
		volRaw.set("LastBackupName", lastJSON)
		volRaw.set("LastBackupAt", atJSON)
		changed = true
	}
	if c.Skipped == "" {
		count, _ := json.Marshal(strconv.Itoa(c.Referenced))
		volRaw.set("BlockCount", count)
		changed = true
	}
	if changed {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		data, err := volRaw.marshalVolume()
		if err != nil {
			return c, err
		}
		if err := writeAtomic(vol, volumeCfg, data); err != nil {
			return c, fmt.Errorf("update volume.cfg: %w", err)
		}
	}
	return c, nil
}

// scanResult is what block collection keeps of one remaining backup cfg
// (its blocks go straight to the scan's add).
type scanResult struct {
	createdTime, snapshotCreatedAt string
	err                            error
}

// checkScans applies the collection's rules to the scans of names, in
// order: a cancelled read is an error; an unreadable or in-progress
// backup (or, with updateLast, an unparsable SnapshotCreatedAt) is why
// nothing may be collected. Otherwise it returns the latest backup (with
// updateLast).
func checkScans(names []string, scans []scanResult, updateLast bool) (latest latestBackup, skipped string, err error) {
	for i, sc := range scans {
		n := names[i]
		if sc.err != nil {
			if errors.Is(sc.err, context.Canceled) || errors.Is(sc.err, context.DeadlineExceeded) {
				return latest, "", sc.err
			}
			return latest, fmt.Sprintf("backup %s unreadable: %v", n, sc.err), nil
		}
		if sc.createdTime == "" {
			return latest, fmt.Sprintf("backup %s in progress", n), nil
		}
		if updateLast {
			if err := latest.consider(n, sc.snapshotCreatedAt); err != nil {
				return latest, err.Error(), nil
			}
		}
	}
	return latest, "", nil
}

// scanAll reads and scans the cfgs in parallel (they are independent, and
// on a network mount each read waits on the server), passing the blocks
// each references to add (called concurrently; the slices alias a read
// buffer that is reused once add returns), one result per name. A cfg
// that turns out unreadable or in progress still adds what it had: then
// nothing is unlinked at all, so extra references cannot hurt.
func (s *Store) scanAll(ctx context.Context, vol *os.Root, names []string, add func([][]byte)) []scanResult {
	out := make([]scanResult, len(names))
	work := make(chan int)
	var wg sync.WaitGroup
	// Twice the CPUs: half of the workers are usually waiting on a read.
	for range min(len(names), max(4, 2*runtime.GOMAXPROCS(0))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte // reused: a large volume's cfgs are tens of MB each
			for i := range work {
				if err := ctx.Err(); err != nil {
					out[i].err = err
					continue
				}
				data, _, err := readBoundedInto(vol, backupCfgPath(names[i]), s.opts.MaxConfigBytes, buf)
				var refs backupRefs
				if err == nil {
					buf = data
					refs, err = scanBackup(data)
				}
				if err == nil {
					add(refs.checksums)
				}
				out[i] = scanResult{createdTime: refs.createdTime, snapshotCreatedAt: refs.snapshotCreatedAt, err: err}
			}
		}()
	}
	for i := range names {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

// blockCountOf is volume.cfg's BlockCount, if it has one.
func blockCountOf(volRaw rawObject) (int, bool) {
	raw, ok := volRaw.vals["BlockCount"]
	if !ok {
		return 0, false
	}
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(str)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// candidateIndex is a targeted collection's distinct candidates, with a
// mark per candidate that the scanners set when a remaining backup
// references it. It is read-only while they run, so marking takes no lock
// and allocates nothing. Every block of every remaining backup is looked
// up in it, so it is a flat open-addressing table rather than a map: one
// word per slot holds a hash tag and the candidate's index, and most
// lookups touch that word and nothing else.
type candidateIndex struct {
	seed  maphash.Seed
	slots []uint64 // 0 (empty), or the hash's high 32 bits | index+1
	cks   []string
	marks []atomic.Bool
}

const tagMask = uint64(0xffffffff_00000000)

func newCandidateIndex(candidates [][]byte) *candidateIndex {
	// The candidates are kept as substrings of one copy of them all: one
	// allocation instead of one per candidate.
	n := 0
	for _, ck := range candidates {
		n += len(ck)
	}
	buf := make([]byte, 0, n)
	for _, ck := range candidates {
		buf = append(buf, ck...)
	}
	all := string(buf)
	size := 1
	for size < 2*len(candidates) { // at most half full
		size <<= 1
	}
	x := &candidateIndex{seed: maphash.MakeSeed(), slots: make([]uint64, size)}
	off := 0
	for _, ck := range candidates {
		key := all[off : off+len(ck)]
		off += len(ck)
		if i, slot, h := x.find(ck); i < 0 {
			x.slots[slot] = h&tagMask | uint64(len(x.cks)+1)
			x.cks = append(x.cks, key)
		}
	}
	x.marks = make([]atomic.Bool, len(x.cks))
	return x
}

// find returns ck's index in cks, or -1 and the empty slot where it
// belongs; h is ck's hash.
func (x *candidateIndex) find(ck []byte) (i, slot int, h uint64) {
	h = maphash.Bytes(x.seed, ck)
	mask := len(x.slots) - 1
	for slot = int(h) & mask; ; slot = (slot + 1) & mask {
		e := x.slots[slot]
		if e == 0 {
			return -1, slot, h
		}
		if e&tagMask == h&tagMask {
			if i := int(e&^tagMask) - 1; x.cks[i] == string(ck) {
				return i, slot, h
			}
		}
	}
}

// mark marks the candidates among cks; safe for concurrent use.
func (x *candidateIndex) mark(cks [][]byte) {
	for _, ck := range cks {
		if i, _, _ := x.find(ck); i >= 0 && !x.marks[i].Load() {
			x.marks[i].Store(true)
		}
	}
}

// marked and unmarked count the distinct candidates, after the scan.
func (x *candidateIndex) marked() int { return len(x.cks) - x.unmarked() }

func (x *candidateIndex) unmarked() int {
	n := 0
	for i := range x.marks {
		if !x.marks[i].Load() {
			n++
		}
	}
	return n
}

// blockSet is a set of block checksums that several scanners fill at once:
// 256 shards by the checksum's first two hex digits, each filled a batch at
// a time under its own lock.
type blockSet struct {
	shards [256]struct {
		mu sync.Mutex
		m  map[string]struct{}
	}
}

func newBlockSet() *blockSet {
	b := &blockSet{}
	for i := range b.shards {
		b.shards[i].m = map[string]struct{}{}
	}
	return b
}

// shardOf maps a valid checksum to its shard.
func shardOf(ck []byte) int { return int(hexVal[ck[0]])<<4 | int(hexVal[ck[1]]) }

// addAll adds valid checksums (the scanner validated them).
func (b *blockSet) addAll(cks [][]byte) {
	var batches [256][][]byte
	for _, ck := range cks {
		i := shardOf(ck)
		batches[i] = append(batches[i], ck)
	}
	for i, batch := range batches {
		if len(batch) == 0 {
			continue
		}
		sh := &b.shards[i]
		sh.mu.Lock()
		for _, ck := range batch {
			// The lookup converts without allocating; only a block seen
			// for the first time gets its own string.
			if _, ok := sh.m[string(ck)]; !ok {
				sh.m[string(ck)] = struct{}{}
			}
		}
		sh.mu.Unlock()
	}
}

// has is for after the scanners are done: it takes no lock.
func (b *blockSet) has(ck []byte) bool {
	_, ok := b.shards[shardOf(ck)].m[string(ck)]
	return ok
}

func (b *blockSet) len() int {
	n := 0
	for i := range b.shards {
		b.shards[i].mu.Lock()
		n += len(b.shards[i].m)
		b.shards[i].mu.Unlock()
	}
	return n
}

// removeWorkers unlink block files at once: each unlink is a round trip
// on NFS, and a few in flight hide that latency.
const removeWorkers = 8

// removeBlocks unlinks block files; one already gone counts as removed.
// The files are grouped by first-level bucket, and each bucket directory
// is opened once as an os.Root, so an unlink walks one directory level
// instead of three while still never following a symlink. Once ctx ends
// nothing more is unlinked (the lock may no longer be refreshed), and the
// blocks left count as neither removed nor failed.
func removeBlocks(ctx context.Context, vol *os.Root, cks []string) (removed int, failed []string) {
	groups := map[string][]string{}
	for _, ck := range cks {
		groups[ck[0:2]] = append(groups[ck[0:2]], ck)
	}
	var mu sync.Mutex
	work := make(chan []string)
	var wg sync.WaitGroup
	for range min(len(groups), removeWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			var bad []string
			for group := range work {
				if ctx.Err() != nil {
					continue
				}
				bucket, err := openDir(vol, blocksDir+"/"+group[0][0:2])
				if errors.Is(err, fs.ErrNotExist) {
					n += len(group) // the whole bucket is gone
					continue
				}
				if err != nil {
					bad = append(bad, group...)
					continue
				}
				for _, ck := range group {
					if ctx.Err() != nil {
						break
					}
					if err := bucket.Remove(ck[2:4] + "/" + ck + blockSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
						bad = append(bad, ck)
						continue
					}
					n++
				}
				bucket.Close()
			}
			mu.Lock()
			removed += n
			failed = append(failed, bad...)
			mu.Unlock()
		}()
	}
	for _, g := range groups {
		work <- g
	}
	close(work)
	wg.Wait()
	return removed, failed
}

// readVolumeRaw reads volume.cfg both as its members with raw values
// (rewritten with only the changed values replaced, in Longhorn's field
// order, so fields this package does not know survive byte for byte) and
// parsed.
func (s *Store) readVolumeRaw(vol *os.Root) (rawObject, Volume, error) {
	data, _, err := readBounded(vol, volumeCfg, s.opts.MaxConfigBytes)
	if err != nil {
		return rawObject{}, Volume{}, fmt.Errorf("read volume.cfg: %w", err)
	}
	v, err := ParseVolume(data)
	if err != nil {
		return rawObject{}, Volume{}, err
	}
	raw, err := parseVolumeObject(data)
	if err != nil {
		return rawObject{}, Volume{}, corrupt("volume.cfg", err)
	}
	return raw, v, nil
}

// latestBackup finds the remaining backup with the latest snapshot time,
// as Longhorn's getLatestBackup does (RFC 3339 SnapshotCreatedAt).
type latestBackup struct {
	name, at string
	t        time.Time
}

func (l *latestBackup) consider(name, snapshotCreatedAt string) error {
	t, err := time.Parse(time.RFC3339, snapshotCreatedAt)
	if err != nil {
		return fmt.Errorf("backup %s: cannot parse SnapshotCreatedAt %q", name, snapshotCreatedAt)
	}
	if l.name == "" || t.After(l.t) {
		l.name, l.at, l.t = name, snapshotCreatedAt, t
	}
	return nil
}

// listBackupNames lists backups/ (sorted); a missing directory is none.
func listBackupNames(vol *os.Root) ([]string, error) {
	files, err := readDirNames(vol, backupsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list backups: %w", err)
	}
	var names []string
	for _, f := range files {
		if n := backupNameFromFile(f); n != "" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// listBlocks lists every block file of the volume by checksum. Entries
// that do not look like block files, or sit in the wrong bucket, are
// ignored (and never removed). The first-level buckets are listed by
// several workers: a large volume has tens of thousands of bucket
// directories, and on NFS each listing is a round trip.
func listBlocks(vol *os.Root) (map[string]struct{}, error) {
	l1, err := readDirs(vol, blocksDir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]struct{}{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list blocks: %w", err)
	}
	type listing struct {
		cks []string
		err error
	}
	out := make([]listing, len(l1))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(len(l1), removeWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out[i].cks, out[i].err = listBucket(vol, l1[i])
			}
		}()
	}
	for i := range l1 {
		work <- i
	}
	close(work)
	wg.Wait()
	all := map[string]struct{}{}
	for _, l := range out {
		if l.err != nil {
			return nil, fmt.Errorf("list blocks: %w", l.err)
		}
		for _, ck := range l.cks {
			all[ck] = struct{}{}
		}
	}
	return all, nil
}

// listBucket lists the block files under blocks/<a>/.
func listBucket(vol *os.Root, a string) ([]string, error) {
	bucket, err := openDir(vol, blocksDir+"/"+a)
	if err != nil {
		return nil, err
	}
	defer bucket.Close()
	l2, err := readDirs(bucket, ".")
	if err != nil {
		return nil, err
	}
	var cks []string
	for _, b := range l2 {
		files, err := readDirNames(bucket, b)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			ck, ok := strings.CutSuffix(f, blockSuffix)
			if ok && validChecksum(ck) && ck[0:2] == a && ck[2:4] == b {
				cks = append(cks, ck)
			}
		}
	}
	return cks, nil
}

// readDirs lists the bucket subdirectories (two lowercase hex digits) of
// a blocks directory level.
func readDirs(root *os.Root, dir string) ([]string, error) {
	f, err := openDirFile(root, dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if n := e.Name(); e.IsDir() && len(n) == 2 && validChecksum(n+n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// testHookBeforeRelist lets tests change the backup list mid-collection.
var testHookBeforeRelist = func() {}

func sameSet(a, b []string) bool { return slices.Equal(a, b) } // both sorted

// readDirNames lists a directory inside root.
func readDirNames(root *os.Root, dir string) ([]string, error) {
	f, err := openDirFile(root, dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// readBounded reads a regular file of at most limit bytes.
func readBounded(root *os.Root, name string, limit int64) ([]byte, fs.FileInfo, error) {
	return readBoundedInto(root, name, limit, nil)
}

// readBoundedInto is readBounded into buf's storage when it is large
// enough (the result then aliases buf).
func readBoundedInto(root *os.Root, name string, limit int64, buf []byte) ([]byte, fs.FileInfo, error) {
	f, info, err := openRegular(root, name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if info.Size() > limit {
		return nil, nil, fmt.Errorf("%w: %s is %d bytes, more than %d", backupdelete.ErrCorrupt, name, info.Size(), limit)
	}
	// Read into a buffer of the file's size, as os.ReadFile does, rather
	// than letting io.ReadAll double its way up through a 50 MiB cfg.
	data := buf[:0]
	if int64(cap(data)) < info.Size()+512 {
		data = make([]byte, 0, info.Size()+512)
	}
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if int64(len(data)) > limit {
			break
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if int64(len(data)) > limit {
		return nil, nil, fmt.Errorf("%w: %s grew past %d bytes", backupdelete.ErrCorrupt, name, limit)
	}
	return data, info, nil
}

var (
	_ backupdelete.Backupstore            = (*Store)(nil)
	_ backupdelete.CompletedBackupDeleter = (*Store)(nil)
)
