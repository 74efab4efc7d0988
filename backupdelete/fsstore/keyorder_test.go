package fsstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestVolumeCfgRewrittenInLonghornsFieldOrder: after a deletion,
// volume.cfg has exactly the bytes json.Marshal(backupstore.Volume{...})
// gives for the new values: Longhorn's field order (backupstore.go, type
// Volume), every key it did not change byte for byte; keys Longhorn's
// struct does not have (a newer version's) follow in their file order.
func TestVolumeCfgRewrittenInLonghornsFieldOrder(t *testing.T) {
	for _, c := range []struct {
		name, extra string
	}{
		{"Longhorn's fields only", ""},
		{"with fields of a newer version", `,"ZNewer":{"b":1,"a":[1,2]},"AnOlderUnknown":"x"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			mount, v := threeBackups(t)
			v.write("volume.cfg", longhornVolumeCfg("vol-a", 2<<30, "backup-1", "2026-11-01T00:00:00Z", 4)[:len(longhornVolumeCfg("vol-a", 2<<30, "backup-1", "2026-11-01T00:00:00Z", 4))-1]+c.extra+"}")
			s := openFast(t, mount, Options{})
			if err := s.DeleteBackup(context.Background(), ref1); err != nil {
				t.Fatal(err)
			}
			want := longhornVolumeCfg("vol-a", 2<<30, "backup-3", "2026-11-03T00:00:00Z", 3)
			want = want[:len(want)-1] + c.extra + "}"
			if got := v.read("volume.cfg"); got != want {
				t.Fatalf("volume.cfg\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestVolumeCfgKeySpelledInAnotherCase: encoding/json matches keys without
// regard to case, so Longhorn reads "blockcount" as BlockCount. The
// rewrite must not leave a stale copy under the other spelling (Longhorn
// would read whichever comes last).
func TestVolumeCfgKeySpelledInAnotherCase(t *testing.T) {
	mount, v := threeBackups(t)
	v.write("volume.cfg", `{"Name":"vol-a","Size":"2147483648","lastbackupname":"backup-1","LastBackupAt":"2026-11-01T00:00:00Z","blockcount":"4"}`)
	s := openFast(t, mount, Options{})
	if err := s.DeleteBackup(context.Background(), ref1); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"Name":"vol-a","Size":"2147483648","LastBackupName":%q,"LastBackupAt":%q,"BlockCount":"3"}`, "backup-3", "2026-11-03T00:00:00Z")
	if got := v.read("volume.cfg"); got != want {
		t.Fatalf("volume.cfg\n got %s\nwant %s", got, want)
	}
}

// TestDefaultIsLonghornsSingleTry: without LockWait a Store does what
// Longhorn's FileLock.Lock does today: one look after the 2 s settle, then
// "please try again later"; it does not retry for 30 s.
func TestDefaultIsLonghornsSingleTry(t *testing.T) {
	s, v, clk := lockFixture(t, Options{})
	v.lock("lock-00000000000000aa", 1, true, clk.Now())
	start := clk.Now()
	err := runStepping(t, clk, func() error { return s.DeleteBackup(context.Background(), ref1) })
	var conflict *LockConflictError
	if !errors.As(err, &conflict) || !strings.Contains(err.Error(), "please try again later") {
		t.Fatalf("%v, want a lock conflict", err)
	}
	if took := clk.Since(start); took != LockSettle || conflict.Waited != LockSettle {
		t.Fatalf("refused after %v (waited %v), want one look after the %v settle", took, conflict.Waited, LockSettle)
	}
}
