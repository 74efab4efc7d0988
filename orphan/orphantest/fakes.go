package orphantest

import (
	"context"
	"slices"
	"sync"

	"github.com/caretaker-storage/caretaker/orphan"
)

// Inventory is a fake orphan.Inventory whose snapshot the test sets. It is
// safe for concurrent use; its zero value returns empty snapshots.
type Inventory struct {
	mu      sync.Mutex
	snap    orphan.Snapshot
	err     error
	scans   int
	gate    chan struct{}
	started chan struct{}
}

// Set makes the next scans return snap and err.
func (f *Inventory) Set(snap orphan.Snapshot, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snap, f.err = snap, err
}

// Scans returns how many scans have started.
func (f *Inventory) Scans() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.scans
}

// Hold makes scans that start from now on block until release is called
// or their context ends; started receives once for each such scan. It lets
// a test look at the world while a scan is in progress.
func (f *Inventory) Hold() (started <-chan struct{}, release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	gate, st := make(chan struct{}), make(chan struct{}, 64)
	f.gate, f.started = gate, st
	var once sync.Once
	return st, func() {
		once.Do(func() {
			f.mu.Lock()
			if f.gate == gate {
				f.gate, f.started = nil, nil
			}
			f.mu.Unlock()
			close(gate)
		})
	}
}

// Scan implements orphan.Inventory.
func (f *Inventory) Scan(ctx context.Context) (orphan.Snapshot, error) {
	f.mu.Lock()
	f.scans++
	gate, started := f.gate, f.started
	f.mu.Unlock()
	if gate != nil {
		select {
		case started <- struct{}{}:
		default:
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return orphan.Snapshot{}, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap, f.err
}

// Judge is a fake orphan.Judge: items whose record name is in Verdicts get
// that verdict; any other item gets Default. Safe for concurrent use once
// set up; use Set to change verdicts while a test runs.
type Judge struct {
	mu       sync.Mutex
	verdicts map[string]orphan.Verdict
	Default  orphan.Verdict
	Err      error
}

// Set gives the item with record name the verdict v.
func (j *Judge) Set(name string, v orphan.Verdict) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.verdicts == nil {
		j.verdicts = map[string]orphan.Verdict{}
	}
	j.verdicts[name] = v
}

// Judge implements orphan.Judge.
func (j *Judge) Judge(_ context.Context, it orphan.Item) (orphan.Verdict, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.Err != nil {
		return orphan.Verdict{}, j.Err
	}
	name, err := it.Name()
	if err != nil {
		return orphan.Undecided(err.Error()), nil
	}
	if v, ok := j.verdicts[name]; ok {
		return v, nil
	}
	return j.Default, nil
}

// Deleter is a fake orphan.Deleter that records what it was asked to delete
// and can fail on demand. Safe for concurrent use.
type Deleter struct {
	mu      sync.Mutex
	deleted []string
	fail    map[string]error
	// Hook, if set, runs at the start of every Delete (to block, or to
	// change the world under the sweep).
	Hook func(ctx context.Context, r orphan.Record)
}

// FailWith makes Delete of the named record return err (nil clears it).
func (d *Deleter) FailWith(name string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail == nil {
		d.fail = map[string]error{}
	}
	d.fail[name] = err
}

// Deleted returns the names deleted so far, sorted.
func (d *Deleter) Deleted() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := slices.Clone(d.deleted)
	slices.Sort(out)
	return out
}

// Delete implements orphan.Deleter.
func (d *Deleter) Delete(ctx context.Context, r orphan.Record) error {
	if d.Hook != nil {
		d.Hook(ctx, r)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.fail[r.Name]; err != nil {
		return err
	}
	d.deleted = append(d.deleted, r.Name)
	return nil
}

// FakeAdapter joins an Inventory, a Judge and a Deleter (fakes or not)
// into an orphan.Adapter serving every kind. A nil inv scans nothing.
func FakeAdapter(inv orphan.Inventory, j orphan.Judge, d orphan.Deleter) orphan.Adapter {
	if inv == nil {
		inv = &Inventory{}
	}
	a, err := orphan.NewAdapter(orphan.Kinds(), inv, j, d)
	if err != nil {
		panic("orphantest: " + err.Error()) // only a nil Judge or Deleter gets here
	}
	return a
}
