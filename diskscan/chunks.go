package diskscan

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// Classifying a listing of 100k names against the expected set is one
// map look-up per name, each likely a cache miss: about as long as the
// listing itself. The look-ups are independent and make no system call,
// so they are spread over the processors in chunks; each chunk writes
// only its own indices and its own findings, which the caller merges in
// chunk order, so the outcome does not depend on how many goroutines ran.

// chunkSize is how many names one goroutine classifies before it takes
// the next chunk (and checks ctx).
const chunkSize = 4096

// chunksOf is how many chunks inChunks cuts n names into.
func chunksOf(n int) int { return (n + chunkSize - 1) / chunkSize }

// inChunks calls fn(chunk, lo, hi) for each chunk [lo, hi) of [0, n), on
// up to min(workers, GOMAXPROCS) goroutines at once; one goroutine means
// in order in the calling goroutine. It stops handing out chunks when ctx
// is done and then returns ctx's error once every running fn returned.
func inChunks(ctx context.Context, n, workers int, fn func(chunk, lo, hi int)) error {
	chunks := chunksOf(n)
	workers = min(workers, runtime.GOMAXPROCS(0), chunks)
	var next atomic.Int64
	work := func() {
		for ctx.Err() == nil {
			k := int(next.Add(1)) - 1
			if k >= chunks {
				return
			}
			fn(k, k*chunkSize, min((k+1)*chunkSize, n))
		}
	}
	if workers <= 1 {
		work()
		return ctx.Err()
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		spawn(func() {
			defer wg.Done()
			work()
		})
	}
	wg.Wait()
	return ctx.Err()
}
