package fsstore_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/fsstore"
)

// A backupstore in Longhorn's layout: two backups sharing a block; deleting
// one collects only the block the other does not reference.
func Example() {
	mount, _ := os.MkdirTemp("", "backupstore-example")
	defer os.RemoveAll(mount)
	ctx := context.Background()
	store, err := fsstore.New(fsstore.Options{Dir: mount})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	// A block is named by the SHA-512 of its uncompressed content
	// (Longhorn stores it compressed; here it is stored as it is).
	ck := func(s string) string { return fsstore.BlockChecksum([]byte(s)) }
	_ = store.WriteVolume(ctx, fsstore.Volume{Name: "vol-a", Size: 4 << 20})
	for i, b := range [][]string{{"shared", "one"}, {"shared", "two"}} {
		var maps []fsstore.BlockMapping
		for j, c := range b {
			_ = store.WriteBlock(ctx, "vol-a", ck(c), []byte(c))
			maps = append(maps, fsstore.BlockMapping{Offset: int64(j) << 21, BlockChecksum: ck(c)})
		}
		ts := time.Date(2026, 11, 1+i, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
		_ = store.WriteBackup(ctx, fsstore.Backup{Name: fmt.Sprint("backup-", i+1), VolumeName: "vol-a", SnapshotCreatedAt: ts, CreatedTime: ts, Blocks: maps})
	}
	fmt.Println(fsstore.VolumePath("vol-a"))

	c, err := store.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-1"})
	fmt.Println("removed", c.Removed, "referenced", c.Referenced, err)
	names, _ := store.Backups(ctx, "vol-a")
	v, _ := store.ReadVolume(ctx, "vol-a")
	fmt.Println(names, "BlockCount", v.BlockCount)
	// Output:
	// backupstore/volumes/97/f6/vol-a
	// removed 1 referenced 2 <nil>
	// [backup-2] BlockCount 2
}
