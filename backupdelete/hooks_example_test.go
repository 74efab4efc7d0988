package backupdelete_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
)

// Hooks count what the Driver does, here each act by its outcome: what a
// host exports as metrics.
func ExampleHooksFunc() {
	var (
		mu     sync.Mutex
		counts = map[string]int{}
	)
	done := make(chan struct{})
	store := backupstoretest.NewMemStore()
	ref := backupdelete.BackupRef{Target: "default", Volume: "vol-a", Name: "backup-b"}
	_ = store.Put(ref, false, "k1")
	d, err := backupdelete.NewDriver(store, backupdelete.DriverOptions{
		Hooks: backupdelete.HooksFunc(func(e backupdelete.Event) {
			mu.Lock() // commands report from their own goroutines
			counts[string(e.Op)+" "+string(e.Outcome)]++
			mu.Unlock()
		}),
		OnDone: func(backupdelete.BackupRef, error) { close(done) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()

	ctx := context.Background()
	res, _ := d.Reconcile(ctx, backupdelete.Request{Ref: ref, State: backupdelete.StateCompleted})
	<-done // the command returned
	res, _ = d.Reconcile(ctx, backupdelete.Request{Ref: ref, State: res.State})
	fmt.Println("finalize:", res.Finalize)
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []string{"reconcile started", "delete ok", "check ok", "reconcile finished"} {
		fmt.Println(k, counts[k])
	}
	// Output:
	// finalize: true
	// reconcile started 1
	// delete ok 1
	// check ok 1
	// reconcile finished 1
}
