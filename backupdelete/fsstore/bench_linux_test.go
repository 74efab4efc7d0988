//go:build linux

package fsstore

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// listingFloor times the least a full listing of the volume dir's blocks
// can cost here: every bucket opened (O_DIRECTORY|O_NOFOLLOW), read with
// getdents64 to its end and closed, by workers goroutines over the
// first-level buckets, with no name checked, kept or looked up and
// nothing unlinked. A full collection pays this and then its unlinks.
func listingFloor(b *testing.B, dir string, workers int) (time.Duration, bool) {
	b.Helper()
	t0 := time.Now()
	blocks, err := os.Open(filepath.Join(dir, "blocks"))
	if err != nil {
		b.Fatal(err)
	}
	defer blocks.Close()
	l1, err := blocks.Readdirnames(-1)
	if err != nil {
		b.Fatal(err)
	}
	bfd := int(blocks.Fd())
	work := make(chan string)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			var l2 []string
			// each reads the directory fd to its end, calling f per name.
			each := func(fd int, f func(name []byte)) error {
				for {
					n, err := syscall.Getdents(fd, buf)
					if err != nil {
						return err
					}
					if n <= 0 {
						return nil
					}
					for d := buf[:n]; len(d) > 0; {
						reclen := int(binary.NativeEndian.Uint16(d[16:18]))
						if f != nil {
							f(d[19:reclen])
						}
						d = d[reclen:]
					}
				}
			}
			for a := range work {
				fa, err := syscall.Openat(bfd, a, subdirFlags, 0)
				if err != nil {
					errs <- err
					return
				}
				l2 = l2[:0]
				err = each(fa, func(name []byte) {
					if name[0] != '.' {
						l2 = append(l2, string(name[:2]))
					}
				})
				for _, n := range l2 {
					if err != nil {
						break
					}
					var fb int
					if fb, err = syscall.Openat(fa, n, subdirFlags, 0); err == nil {
						err = each(fb, nil)
						syscall.Close(fb)
					}
				}
				syscall.Close(fa)
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for _, a := range l1 {
		work <- a
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	return time.Since(t0), true
}
