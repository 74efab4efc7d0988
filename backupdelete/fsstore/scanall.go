package fsstore

import (
	"context"
	"os"
	"runtime"
	"sync"

	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhstore"
)

// scanAll reads and scans the cfgs in parallel (they are independent, and
// on a network mount each read waits on the server), passing the blocks
// each references to add (called concurrently; the slices, and the slice
// of them, alias buffers that are reused once add returns), one result
// per name. A cfg that turns out unreadable or in progress still adds
// what it had: then nothing is unlinked at all, so extra references
// cannot hurt.
func (s *Store) scanAll(ctx context.Context, vol *os.Root, names []string, add func([][]byte)) []lhstore.Scan {
	out := make([]lhstore.Scan, len(names))
	work := make(chan int)
	var wg sync.WaitGroup
	// Twice the CPUs: half of the workers are usually waiting on a read.
	for range min(len(names), max(4, 2*runtime.GOMAXPROCS(0))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bufs := getScanBuffers()
			defer putScanBuffers(bufs)
			buf, cks := bufs.data, bufs.cks
			defer func() { bufs.data, bufs.cks = buf, cks }()
			for i := range work {
				if err := ctx.Err(); err != nil {
					out[i].Err = err
					continue
				}
				data, _, err := readBoundedInto(vol, backupCfgPath(names[i]), s.opts.MaxConfigBytes, buf)
				var refs backupRefs
				if err == nil {
					buf = data
					refs, err = scanBackupInto(data, cks)
				}
				if err == nil {
					add(refs.checksums)
					cks = refs.checksums
				}
				out[i] = lhstore.Scan{CreatedTime: refs.createdTime, SnapshotCreatedAt: refs.snapshotCreatedAt, Err: err}
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

// scanBuffers are a scanner's reused buffers: a large volume's cfgs are
// tens of MB each with hundreds of thousands of blocks, and a deletion
// reads every remaining one. They are kept between deletions (freed by
// the garbage collector like any sync.Pool's content) so that a host
// deleting backups one after another does not allocate and fault in
// fresh memory for each. Nothing a scan returns aliases them: add copies
// or only looks up what it is handed, and the scan results are copies.
type scanBuffers struct {
	data []byte
	cks  [][]byte
}

var scanBufferPool sync.Pool

// maxPooledBytes: a larger buffer (an unusually large cfg) is not kept.
const maxPooledBytes = 64 << 20

func getScanBuffers() *scanBuffers {
	if b, ok := scanBufferPool.Get().(*scanBuffers); ok {
		return b
	}
	return &scanBuffers{}
}

func putScanBuffers(b *scanBuffers) {
	if cap(b.data) > maxPooledBytes {
		return
	}
	clear(b.cks[:cap(b.cks)]) // drop the references into the old data
	scanBufferPool.Put(b)
}
