package fsstore

import (
	"slices"
	"sync"
)

// This file removes the directories a deletion emptied, as Longhorn does:
// its FileSystemOperator.Remove (longhorn/backupstore fsops/fsops.go),
// after removing a file, removes each parent directory in turn and stops
// at the first that is not empty (or at the backupstore base). So after
// Longhorn deletes a volume's last block in a bucket, blocks/<a>/<b>/ and
// an emptied blocks/<a>/ are gone, and each directory left behind would be
// one more listing round trip in every later full collection (Longhorn's
// lists every bucket on every deletion). We stop below the volume
// directory, which always holds volume.cfg.
//
// Only an empty directory is ever removed: on Linux with unlinkat(2) and
// AT_REMOVEDIR relative to a descriptor of its parent (rmdir semantics:
// ENOTEMPTY on a directory that is not empty, ENOTDIR on anything that is
// not a directory, no symlink followed), elsewhere with Lstat and
// os.Root.Remove. A failure leaves the directory, which is only untidy,
// and is not reported.
//
// The race with a writer: Longhorn's writer (fsops Write) creates the
// file's directory with MkdirAll and then writes a temporary file in it;
// a removal between the two makes that write fail (ENOENT). For blocks/
// and backups/ the lock protocol excludes it: the removals run in the
// collection's last step, inside Store.deleteBackup while its deletion
// lock (type 2) is held and refreshed, and not at all once ctx has ended
// (when the refresh stops); a backup writes blocks and cfgs only under a
// backup lock (type 1, Longhorn's CreateDeltaBlockBackup), and the two
// types exclude each other. Other deletions (type 2 too) only remove.
// locks/ is removed by Lock.Release after our lock file is gone, when we
// hold nothing: a taker that has just created locks/ but not yet written
// its lock file can then fail its attempt. Longhorn's own lock removal
// (removeLock through the same Remove) has that race; nothing is lost (the
// taker has nothing in the store yet) and it tries again. Our own takers
// retry the write after creating locks/ again (see writeLockFile).

// bucketSet gathers the second-level buckets (ck[0:4]) that a collection
// unlinked blocks from, from concurrent sweep workers.
type bucketSet struct {
	mu sync.Mutex
	m  map[string]struct{}
}

func (b *bucketSet) add(ck []byte) {
	b.mu.Lock()
	if b.m == nil {
		b.m = map[string]struct{}{}
	}
	if _, ok := b.m[string(ck[0:4])]; !ok {
		b.m[string(ck[0:4])] = struct{}{}
	}
	b.mu.Unlock()
}

// sorted returns the buckets, sorted (so grouped by first level).
func (b *bucketSet) sorted() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.m))
	for k := range b.m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
