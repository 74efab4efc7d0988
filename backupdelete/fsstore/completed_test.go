package fsstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// TestDeleteCompletedBackupRefuses: under the deletion lock, a backup cfg
// with an empty CreatedTime (Longhorn's mark of a backup in progress) or
// one that cannot be read stops the deletion before anything is removed,
// and the lock is released.
func TestDeleteCompletedBackupRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(v *lhVolume)
		want  error
	}{
		{"in progress", func(v *lhVolume) { v.inProgressBackup("backup-1", ckA, ckS) }, backupdelete.ErrInProgress},
		{"corrupt", func(v *lhVolume) {
			v.write("backups/backup_backup-1.cfg", `{"Name":"backup-1","VolumeName":"vol-a","Blocks":[{"Offset":0,"BlockChecksum":"../../x"}]}`)
		}, backupdelete.ErrCorrupt},
		{"truncated", func(v *lhVolume) { v.write("backups/backup_backup-1.cfg", `{"Name":"backup-1","Vol`) }, backupdelete.ErrCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, v, clk := lockFixture(t, Options{})
			c.setup(v)
			before := v.read("volume.cfg")
			err := runStepping(t, clk, func() error { return s.DeleteCompletedBackup(context.Background(), ref1) })
			if !errors.Is(err, c.want) {
				t.Fatalf("%v, want %v", err, c.want)
			}
			if !v.exists("backups/backup_backup-1.cfg") || !v.blockExists(ckA) || v.read("volume.cfg") != before {
				t.Fatal("something was removed or rewritten")
			}
			if ours := ourLocks(v); len(ours) != 0 {
				t.Fatalf("lock files left: %v", ours)
			}
		})
	}
	t.Run("completed", func(t *testing.T) {
		s, v, clk := lockFixture(t, Options{})
		if err := runStepping(t, clk, func() error { return s.DeleteCompletedBackup(context.Background(), ref1) }); err != nil {
			t.Fatal(err)
		}
		if v.exists("backups/backup_backup-1.cfg") || v.blockExists(ckA) {
			t.Fatal("not deleted")
		}
	})
}

// ourLocks lists the lock files in the volume other than the given
// foreign ones.
func ourLocks(v *lhVolume, foreign ...string) []string {
	entries, _ := os.ReadDir(filepath.Join(v.dir, "locks"))
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".lck") && !contains(foreign, e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
