package fsstore

import (
	"errors"
	"reflect"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

func FuzzParseBackup(f *testing.F) {
	f.Add([]byte(longhornBackupCfg("backup-1", "vol-a", "2026-11-01T00:00:00Z", "2026-11-01T00:00:00Z", []string{checksum("a"), checksum("b")})))
	f.Add([]byte(longhornBackupCfg("backup-1", "vol-a", "2026-11-01T00:00:00Z", "", nil)))
	f.Add([]byte(`{"Name":"backup-1","VolumeName":"vol-a","Blocks":[{"Offset":-1,"BlockChecksum":"../x"}]}`))
	f.Add([]byte(`{"Size":123}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBackup(data)
		refs, serr := scanBackup(data)
		if err != nil {
			if !errors.Is(err, backupdelete.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// Whatever ParseBackup accepts, block collection reads the same way.
		if serr != nil {
			t.Fatalf("ParseBackup accepted what scanBackup rejects: %v", serr)
		}
		if refs.createdTime != b.CreatedTime || refs.snapshotCreatedAt != b.SnapshotCreatedAt || len(refs.checksums) != len(b.Blocks) {
			t.Fatalf("scan %+v vs parse %+v", refs, b)
		}
		for i, m := range b.Blocks {
			if !validChecksum(m.BlockChecksum) || string(refs.checksums[i]) != m.BlockChecksum {
				t.Fatalf("block %d: %q", i, m.BlockChecksum)
			}
			_ = blockPath(m.BlockChecksum) // must not panic
		}
		if !backupdelete.ValidName(b.Name) || !backupdelete.ValidName(b.VolumeName) {
			t.Fatal("invalid names accepted")
		}
		// Round trip: what we write parses back to the same backup.
		out, err := encodeBackup(b)
		if err != nil {
			t.Fatal(err)
		}
		b2, err := ParseBackup(out)
		if len(b.Blocks) == 0 {
			b.Blocks = nil // Longhorn's omitempty drops an empty list
		}
		if err != nil || !reflect.DeepEqual(b, b2) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, b, b2)
		}
	})
}

func FuzzParseVolume(f *testing.F) {
	f.Add([]byte(longhornVolumeCfg("vol-a", 2<<30, "backup-1", "2026-11-01T00:00:00Z", 3)))
	f.Add([]byte(`{"Name":"vol-a","Size":"1","BlockCount":"-1"}`))
	f.Add([]byte(`{"Name":"vol-a","DataEngine":"v2"}`))
	f.Add([]byte(`{"Name":"vol-a","DataEngine":7}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseVolume(data)
		if err != nil {
			if !errors.Is(err, backupdelete.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if v.Size < 0 || v.BlockCount < 0 || !backupdelete.ValidName(v.Name) {
			t.Fatalf("accepted %+v", v)
		}
		out, err := encodeVolume(v)
		if err != nil {
			t.Fatal(err)
		}
		v2, err := ParseVolume(out)
		if err != nil || !reflect.DeepEqual(v, v2) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, v, v2)
		}
	})
}

func FuzzParseLockFile(f *testing.F) {
	f.Add([]byte(longhornLock("lock-0123456789abcdef", 1, true)))
	f.Add([]byte(longhornLock("lock-0123456789abcdef", 2, false)))
	f.Add([]byte(`{"Name":"../../x","Type":1}`))
	f.Add([]byte(`{"Name":"lock-a","Type":3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseLockFile(data)
		if err != nil {
			if !errors.Is(err, backupdelete.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if l.Type != LockBackup && l.Type != LockDeletion || l.Name == "" {
			t.Fatalf("accepted %+v", l)
		}
	})
}

// FuzzScanBackup checks the fast cfg scanner against encoding/json: when
// the fast path answers, encoding/json must accept the same input and
// read the same fields (and reject it exactly when the fast path's result
// fails validation).
func FuzzScanBackup(f *testing.F) {
	ck := checksum("a")
	for _, s := range []string{
		longhornBackupCfg("backup-1", "vol-a", "2026-11-01T00:00:00Z", "2026-11-01T00:00:00Z", []string{ck, checksum("b")}),
		`{"name":"backup-1","VOLUMENAME":"vol-a","blocks":[{"offset":0,"blockchecksum":"` + ck + `"}]}`,
		`{"Name":"backup-1","Name":null,"VolumeName":"vol-a","Blocks":null}`,
		`{"Name":"backup-1","VolumeName":"vol-a","Blocks":[{"Offset":1e3,"BlockChecksum":"` + ck + `"}]}`,
		`{"Name":"backup-1","VolumeName":"vol-a","Blocks":[{"Offset":-0,"BlockChecksum":"` + ck + `","X":[{"y":"\u00e9"}]}]}`,
		`{"Name":"backup-1","VolumeName":"vol-a","Blocks":[{"Offset":-5,"BlockChecksum":"` + ck + `"}]}`,
		`{"Name":"backup-1","VolumeName":"vol-a","Blocks":[],"Blocks":[{}]}`,
		`{"Name":"b\u0061ckup-1","VolumeName":"vol-a"}`,
		`{"Name":"backup-1","VolumeName":"vol-a","Labels":{"a":"b"},"Size":"1","IsIncremental":true} `,
		`{"Name":"backup-1","VolumeName":"vol-a"} x`,
		// 64 digits with one that is not lowercase hex, at each end.
		`{"Name":"backup-1","VolumeName":"vol-a","Blocks":[{"Offset":0,"BlockChecksum":"` + ck[:63] + `A"}]}`,
		`{"Name":"backup-1","VolumeName":"vol-a","Blocks":[{"Offset":0,"BlockChecksum":"g` + ck[1:] + `"}]}`,
		`{"Name":"backup-1","VolumeName":"vol-a","Blocks":[{"Offset":0,"BlockChecksum":"` + ck + `0"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := scanBackupFast(data)
		if !ok {
			return
		}
		slow, serr := scanBackupSlow(data)
		ferr := checkScanned(fast)
		if (serr == nil) != (ferr == nil) {
			t.Fatalf("fast path error %v, encoding/json error %v", ferr, serr)
		}
		if serr != nil {
			return
		}
		if fast.name != slow.name || fast.volumeName != slow.volumeName || fast.createdTime != slow.createdTime ||
			fast.snapshotCreatedAt != slow.snapshotCreatedAt || len(fast.checksums) != len(slow.checksums) {
			t.Fatalf("fast %+v\nslow %+v", fast, slow)
		}
		for i := range fast.checksums {
			if string(fast.checksums[i]) != string(slow.checksums[i]) {
				t.Fatalf("checksum %d: %q vs %q", i, fast.checksums[i], slow.checksums[i])
			}
		}
	})
}
