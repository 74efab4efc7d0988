package backupdelete_test

import (
	"context"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
	"github.com/caretaker-storage/caretaker/internal/logrecord"
)

// TestDriverLogsDeletion follows a deletion that fails once, backs off,
// and succeeds, and checks that each decision and outcome is logged with
// the backup, its state and the attempt.
func TestDriverLogsDeletion(t *testing.T) {
	rec := logrecord.New(slog.LevelDebug)
	r := newRig(t, backupdelete.DriverOptions{Logger: slog.New(rec)})
	must(t, r.mem.Put(refB, false, "k1"))
	r.faulty.InjectDelete(backupstoretest.Fault{Err: syscall.EIO})
	state, msg := backupdelete.StateCompleted, ""
	name := map[string]string{"backup": "backup-b", "volume": "vol-a", "target": "default"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range name {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}

	r.reconcile(t, refB, &state, &msg)
	rec.Want(t, 1, slog.LevelInfo, "backupdelete: deletion started", with("state", "Deleting", "attempt", "1", "backoff", "10s"))
	r.waitDone(t)
	rec.Want(t, 1, slog.LevelError, "backupdelete: delete command failed", with("attempt", "1", "op", "delete", "err", syscall.EIO.Error()))

	r.reconcile(t, refB, &state, &msg)
	e := rec.Want(t, 1, slog.LevelWarn, "backupdelete: deletion failed", with("state", "Error", "attempt", "1", "reason", "command failed"))
	if e[0].Attrs["message"] != msg {
		t.Fatalf("deletion failed logged message %q, want the status message %q", e[0].Attrs["message"], msg)
	}

	r.clock.Step(5 * time.Second)
	r.reconcile(t, refB, &state, &msg)
	rec.Want(t, 1, slog.LevelDebug, "backupdelete: backing off", with("state", "Error", "attempt", "1", "retry_in", "5s"))

	r.clock.Step(5 * time.Second)
	r.reconcile(t, refB, &state, &msg)
	rec.Want(t, 1, slog.LevelInfo, "backupdelete: deletion started", with("state", "Deleting", "attempt", "2", "backoff", "20s"))
	if err := r.waitDone(t); err != nil {
		t.Fatal(err)
	}
	rec.Want(t, 1, slog.LevelInfo, "backupdelete: delete command succeeded", with("attempt", "2"))
	if res := r.reconcile(t, refB, &state, &msg); !res.Finalize {
		t.Fatalf("%+v, want finalize", res)
	}
	rec.Want(t, 1, slog.LevelInfo, "backupdelete: deletion finished", with("state", "Deleting", "attempt", "2"))
}

func TestDriverLogsPresenceCheckFailure(t *testing.T) {
	rec := logrecord.New(slog.LevelInfo)
	r := newRig(t, backupdelete.DriverOptions{Logger: slog.New(rec)})
	r.faulty.InjectExists(syscall.ETIMEDOUT)
	if _, err := r.driver.Reconcile(context.Background(), backupdelete.Request{Ref: refB, State: backupdelete.StateDeleting}); err == nil {
		t.Fatal("the check's error was hidden")
	}
	e := rec.Want(t, 1, slog.LevelWarn, "backupdelete: presence check failed", map[string]string{"backup": "backup-b", "volume": "vol-a"})
	if e[0].Attrs["err"] == "" {
		t.Fatalf("no err: %v", e[0])
	}
	if n := len(rec.Entries()); n != 1 {
		t.Fatalf("%d entries at Info and above, want 1:\n%s", n, rec.Dump())
	}
}

func TestDriverWithoutLoggerStaysSilent(t *testing.T) {
	r := newRig(t, backupdelete.DriverOptions{}) // no Logger
	must(t, r.mem.Put(refB, false, "k1"))
	r.faulty.InjectDelete(backupstoretest.Fault{Panic: "boom"})
	state, msg := backupdelete.StateCompleted, ""
	r.reconcile(t, refB, &state, &msg)
	r.waitDone(t)
	r.reconcile(t, refB, &state, &msg)
	r.faulty.InjectExists(syscall.ETIMEDOUT)
	_, _ = r.driver.Reconcile(context.Background(), backupdelete.Request{Ref: refB, State: backupdelete.StateDeleting})
	if state != backupdelete.StateError {
		t.Fatalf("state %q, want Error", state)
	}
}
