package diskscan_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/orphan"
)

// TestErrorsLeaveWithThePackagePrefix: an error an exported function
// returns says "diskscan: " first, also when it comes from the standard
// library or a reader, and keeps its cause for errors.Is and errors.As; a
// refusal of Delete says its reason first and still matches
// orphan.ErrPreconditionFailed; a context's own error is returned as it
// is.
func TestErrorsLeaveWithThePackagePrefix(t *testing.T) {
	boom := errors.New("boom")
	prefixed := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.HasPrefix(err.Error(), "diskscan: ") {
			t.Errorf("%s: %v; want an error starting with \"diskscan: \"", what, err)
		}
	}

	_, err := diskscan.ReadVolumeMeta(iotest.ErrReader(boom), 0)
	prefixed("ReadVolumeMeta of a failing reader", err)
	if !errors.Is(err, boom) {
		t.Errorf("ReadVolumeMeta: %v does not wrap the reader's error", err)
	}
	_, err = diskscan.ParseReplicaList(iotest.ErrReader(boom), 0)
	prefixed("ParseReplicaList of a failing reader", err)
	_, err = diskscan.ReadDiskConfig(iotest.ErrReader(boom), 0)
	prefixed("ReadDiskConfig of a failing reader", err)

	_, err = diskscan.FSID(filepath.Join(t.TempDir(), "missing"))
	prefixed("FSID of a missing path", err)
	var pe *os.PathError
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("FSID: %v is not an *os.PathError wrapping fs.ErrNotExist", err)
	}

	o, err := diskscan.NewOrphans(diskscan.NewStaticExpected(), diskscan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = o.Delete(context.Background(), orphan.Record{Name: "orphan-x", Kind: orphan.KindBackup})
	prefixed("Delete of a backup record", err)
	if !errors.Is(err, orphan.ErrPreconditionFailed) || !errors.Is(err, diskscan.ErrNotReplica) {
		t.Errorf("Delete refusal %v does not match orphan.ErrPreconditionFailed and ErrNotReplica", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := o.Delete(ctx, orphan.Record{Name: "orphan-x"}); err != context.Canceled {
		t.Errorf("Delete with a cancelled context: %v; want context.Canceled itself", err)
	}
}
