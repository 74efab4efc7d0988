package mgmtapi_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/tokenring/mgmtapi"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// TestStopCleanupsWaitsForItsJobs: a cleanup whose wait was cut short (a
// lost connection, a cancelled run) goes on in the node. The Management
// API cannot stop it, so StopCleanups waits until the job has ended: it
// fails while the job runs, and returns nil only once the job reads
// COMPLETED. A StopCleanups that returned at once would let a driver
// start a node sharing its ranges beside a cleanup still running.
func TestStopCleanupsWaitsForItsJobs(t *testing.T) {
	const polls = 5
	srv := tokenringtest.NewMgmtServer(cluster(), tokenringtest.MgmtServerOptions{JobPolls: polls})
	defer srv.Close()
	fc := clocktesting.NewFakeClock(time.Unix(0, 0))
	cl, err := mgmtapi.New(srv.URL, mgmtapi.Options{Clock: fc, PollInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.CleanupKeyspace(ctx, "shop") }()
	waitForWaiter(t, fc)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("CleanupKeyspace: %v, want cancelled", err)
	}
	if jobs := srv.Jobs(); len(jobs) != 1 || jobs[0].Status != tokenringtest.MgmtJobWaiting {
		t.Fatalf("jobs %+v, want one still running", jobs)
	}

	// Bounded by a context that ends while the job runs: an error.
	short, cancelShort := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- cl.StopCleanups(short) }()
	waitForWaiter(t, fc)
	cancelShort()
	if err := <-stopped; err == nil {
		t.Fatal("StopCleanups returned nil while the job was still running")
	}

	// Unbounded: nil, and only after the job ended.
	go func() { stopped <- cl.StopCleanups(context.Background()) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatal(err)
			}
			if jobs := srv.Jobs(); jobs[0].Status != tokenringtest.MgmtJobCompleted {
				t.Fatalf("StopCleanups returned while the job was %s", jobs[0].Status)
			}
			// Nothing is pending any more: the next stop returns at once.
			if err := cl.StopCleanups(context.Background()); err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("StopCleanups never returned")
		}
		if fc.HasWaiters() {
			fc.Step(time.Second)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCleanerForGivesOneCleanerPerEndpoint: the jobs an attempt started
// must be known to the next attempt's StopCleanups.
func TestCleanerForGivesOneCleanerPerEndpoint(t *testing.T) {
	cleanerFor := mgmtapi.CleanerFor("http", 0, mgmtapi.Options{})
	a, err := cleanerFor("10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := cleanerFor("10.0.0.1")
	c, _ := cleanerFor("10.0.0.2")
	if a != b || a == c {
		t.Fatalf("CleanerFor gave %p, %p for one endpoint and %p for another", a, b, c)
	}
}
