package salvage_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/caretaker-storage/caretaker/salvage"
)

// recordingWriter fails the test's check if anything is written.
type recordingWriter struct{ writes int }

func (w *recordingWriter) WriteAt(p []byte, off int64) (int, error) { w.writes++; return len(p), nil }

func TestRecoverRefusesAnUnrecoverableCopy(t *testing.T) {
	disk := newDisk(t)
	r := threeLayers()
	r.Rebuilding = true
	dir := write(t, disk, "pvc-1-0a1b2c3d", r)
	var w recordingWriter
	in, _, err := salvage.Recover(context.Background(), dir, &w, salvage.RecoverOptions{})
	var nr *salvage.NotRecoverableError
	if !errors.Is(err, salvage.ErrNotRecoverable) || !errors.As(err, &nr) || len(nr.Reasons) == 0 || nr.Reasons[0].Kind != salvage.ReasonRebuilding {
		t.Fatalf("err = %v, want a NotRecoverableError for rebuilding", err)
	}
	if in == nil || in.Recoverable || w.writes != 0 {
		t.Fatalf("inspection %+v, %d writes", in, w.writes)
	}
	// Forced, it goes on to the export (whatever the export then says).
	if _, _, err := salvage.Recover(context.Background(), dir, &w, salvage.RecoverOptions{Force: true}); errors.Is(err, salvage.ErrNotRecoverable) {
		t.Fatalf("forced: %v", err)
	}
	// Without a volume.meta there is nothing to read, forced or not.
	if err := os.Remove(dir + "/volume.meta"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := salvage.Recover(context.Background(), dir, &w, salvage.RecoverOptions{Force: true}); !errors.Is(err, salvage.ErrNotRecoverable) {
		t.Fatalf("forced without volume.meta: %v", err)
	}
}
