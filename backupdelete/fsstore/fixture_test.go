package fsstore

import (
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete/internal/storetest"
	"k8s.io/utils/clock"
)

// This file builds backupstores the way Longhorn's backupstore module
// writes them (Longhorn's backupstore layout, checked against
// longhorn/backupstore backupstore.go, config.go, deltablock.go, lock.go):
// the JSON below is what encoding/json produces for Longhorn's own structs,
// field order, string-encoded int64s and double-encoded ",string" strings
// included. It is written with plain os calls, not with this package, so
// the tests check our reader against Longhorn's writer.

// longhornVolumeCfg is json.Marshal(backupstore.Volume{...}).
func longhornVolumeCfg(name string, size int64, lastBackup, lastAt string, blockCount int) string {
	return fmt.Sprintf(`{"Name":%q,"Size":"%d","Labels":null,"CreatedTime":"2026-11-01T10:00:00Z","LastBackupName":%q,"LastBackupAt":%q,"BlockCount":"%d","BackingImageName":"\"\"","BackingImageChecksum":"\"\"","CompressionMethod":"\"lz4\"","StorageClassName":"\"longhorn\"","DataEngine":"\"v1\""}`,
		name, size, lastBackup, lastAt, blockCount)
}

// longhornBackupCfg is json.Marshal(backupstore.Backup{...}) of a completed
// (createdTime set) or in-progress (createdTime "") backup.
func longhornBackupCfg(name, volume, snapshotAt, createdTime string, blocks []string) string {
	var b strings.Builder
	for i, ck := range blocks {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"Offset":%d,"BlockChecksum":%q}`, int64(i)*2097152, ck)
	}
	blocksJSON := ""
	if len(blocks) > 0 {
		blocksJSON = `"Blocks":[` + b.String() + `],`
	}
	return fmt.Sprintf(`{"Name":%q,"VolumeName":%q,"SnapshotName":"snap-%s","SnapshotCreatedAt":%q,"CreatedTime":%q,"Size":"%d","Labels":{"longhorn.io/volume-access-mode":"rwo"},"Parameters":null,"IsIncremental":true,"CompressionMethod":"lz4","NewlyUploadedDataSize":"0","ReUploadedDataSize":"0","ProcessingBlocks":{},%s"SingleFile":{"FilePath":""}}`,
		name, volume, name, snapshotAt, createdTime, int64(len(blocks))*2097152, blocksJSON)
}

// longhornLock is json.Marshal(backupstore.FileLock{...}).
func longhornLock(name string, typ int, acquired bool) string {
	return fmt.Sprintf(`{"Name":%q,"Type":%d,"Acquired":%v}`, name, typ, acquired)
}

// checksum returns a valid block checksum derived from seed.
var checksum = storetest.Checksum

// lhVolume is a volume written in Longhorn's layout under mount.
type lhVolume struct {
	t     testing.TB
	mount string
	name  string
	dir   string
}

func newLonghornVolume(t testing.TB, mount, name string) *lhVolume {
	sum := sha512.Sum512([]byte(name))
	c := hex.EncodeToString(sum[:])
	dir := filepath.Join(mount, "backupstore", "volumes", c[0:2], c[2:4], name)
	return &lhVolume{t: t, mount: mount, name: name, dir: dir}
}

func (v *lhVolume) write(rel, content string) {
	v.t.Helper()
	p := filepath.Join(v.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		v.t.Fatal(err)
	}
	// Longhorn's vfs driver writes <file>.tmp and renames it.
	if err := os.WriteFile(p+".tmp", []byte(content), 0o644); err != nil {
		v.t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		v.t.Fatal(err)
	}
}

func (v *lhVolume) volumeCfg(lastBackup, lastAt string, blockCount int) {
	v.write("volume.cfg", longhornVolumeCfg(v.name, 2<<30, lastBackup, lastAt, blockCount))
}

func (v *lhVolume) backup(name, snapshotAt string, blocks ...string) {
	v.write("backups/backup_"+name+".cfg", longhornBackupCfg(name, v.name, snapshotAt, snapshotAt, blocks))
}

func (v *lhVolume) inProgressBackup(name string, blocks ...string) {
	v.write("backups/backup_"+name+".cfg", longhornBackupCfg(name, v.name, "2026-11-21T00:00:00Z", "", blocks))
}

func (v *lhVolume) block(ck string) {
	v.write(filepath.Join("blocks", ck[0:2], ck[2:4], ck+".blk"), "lz4 data of "+ck[:8])
}

func (v *lhVolume) lock(name string, typ int, acquired bool, mtime time.Time) {
	v.t.Helper()
	p := filepath.Join("locks", name+".lck")
	v.write(p, longhornLock(name, typ, acquired))
	if err := os.Chtimes(filepath.Join(v.dir, p), mtime, mtime); err != nil {
		v.t.Fatal(err)
	}
}

func (v *lhVolume) exists(rel string) bool {
	_, err := os.Stat(filepath.Join(v.dir, rel))
	return err == nil
}

func (v *lhVolume) blockExists(ck string) bool {
	return v.exists(filepath.Join("blocks", ck[0:2], ck[2:4], ck+".blk"))
}

func (v *lhVolume) read(rel string) string {
	v.t.Helper()
	b, err := os.ReadFile(filepath.Join(v.dir, rel))
	if err != nil {
		v.t.Fatal(err)
	}
	return string(b)
}

// fastClock is the real clock with every wait divided by 1000: the lock
// protocol's 2 s settle takes 2 ms, so tests that are not about the lock's
// timing run quickly on real files, whose times are real.
type fastClock struct{ clock.RealClock }

func (fastClock) NewTimer(d time.Duration) clock.Timer { return clock.RealClock{}.NewTimer(d / 1000) }
func (fastClock) After(d time.Duration) <-chan time.Time {
	return clock.RealClock{}.After(d / 1000)
}
func (fastClock) Sleep(d time.Duration) { clock.RealClock{}.Sleep(d / 1000) }
