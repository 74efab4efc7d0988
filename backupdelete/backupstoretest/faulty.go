package backupstoretest

import (
	"context"
	"sync"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// Fault is one injected misbehaviour of a DeleteBackup call. Faults apply
// in this order: wait, panic, the real call (if Partial), the error.
type Fault struct {
	// Wait, if not nil, blocks the call until it is closed or the call's
	// context ends (then the call returns ctx.Err(), like a command that
	// timed out). A Fault{Wait: make(chan struct{})} never closed hangs
	// until cancelled.
	Wait <-chan struct{}
	// Panic, if not nil, makes the call panic with this value.
	Panic any
	// Partial runs the real DeleteBackup before returning Err: the work
	// was done (or half done), yet the caller sees a failure.
	Partial bool
	// Err is returned (after the real call if Partial; instead of it
	// otherwise). Nil with Partial false means "no fault": the real call
	// runs.
	Err error
}

// Faulty wraps a Backupstore and injects faults, one per call, in the
// order they were queued; calls with no fault queued go to the wrapped
// store. It is safe for concurrent use.
type Faulty struct {
	Store backupdelete.Backupstore

	mu           sync.Mutex
	deleteFaults []Fault
	existsFaults []error
	deleteCalls  int
}

// InjectDelete queues faults for the next DeleteBackup calls.
func (f *Faulty) InjectDelete(faults ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleteFaults = append(f.deleteFaults, faults...)
}

// InjectExists queues errors for the next BackupExists calls.
func (f *Faulty) InjectExists(errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.existsFaults = append(f.existsFaults, errs...)
}

// Clear drops every queued fault.
func (f *Faulty) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleteFaults, f.existsFaults = nil, nil
}

// DeleteCalls returns how many DeleteBackup calls were made.
func (f *Faulty) DeleteCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deleteCalls
}

// DeleteBackup implements backupdelete.Backupstore with the next fault.
func (f *Faulty) DeleteBackup(ctx context.Context, ref backupdelete.BackupRef) error {
	f.mu.Lock()
	f.deleteCalls++
	var fault Fault
	if len(f.deleteFaults) > 0 {
		fault, f.deleteFaults = f.deleteFaults[0], f.deleteFaults[1:]
	}
	f.mu.Unlock()

	if fault.Wait != nil {
		select {
		case <-fault.Wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fault.Panic != nil {
		panic(fault.Panic)
	}
	if fault.Err == nil || fault.Partial {
		if err := f.Store.DeleteBackup(ctx, ref); err != nil {
			return err
		}
	}
	return fault.Err
}

// BackupExists implements backupdelete.Backupstore with the next fault.
func (f *Faulty) BackupExists(ctx context.Context, ref backupdelete.BackupRef) (bool, error) {
	f.mu.Lock()
	var err error
	if len(f.existsFaults) > 0 {
		err, f.existsFaults = f.existsFaults[0], f.existsFaults[1:]
	}
	f.mu.Unlock()
	if err != nil {
		return false, err
	}
	return f.Store.BackupExists(ctx, ref)
}

var _ backupdelete.Backupstore = (*Faulty)(nil)

// CollectVolume passes the Driver's collection through to the wrapped
// store when it is a backupdelete.Collector, and does nothing otherwise,
// so that wrapping a store in a Faulty does not hide its recovery.
func (f *Faulty) CollectVolume(ctx context.Context, ref backupdelete.BackupRef) error {
	if c, ok := f.Store.(backupdelete.Collector); ok {
		return c.CollectVolume(ctx, ref)
	}
	return nil
}
