package lhformat

import (
	"testing"
	"time"
)

func TestBlockFromPath(t *testing.T) {
	ck := BlockChecksum([]byte("x"))
	for _, c := range []struct {
		rel string
		ok  bool
	}{
		{ck[0:2] + "/" + ck[2:4] + "/" + ck + ".blk", true},
		{ck[0:2] + "/" + ck[2:4] + "/" + ck + ".blk.tmp.1", false},
		{"00/00/" + ck + ".blk", false}, // the wrong bucket
		{ck[0:2] + "/" + ck[2:4] + "/" + "XYZ.blk", false},
		{ck[0:2] + "/" + ck[2:4] + "/x/" + ck + ".blk", false},
		{"short", false},
	} {
		got, ok := BlockFromPath(c.rel)
		if ok != c.ok || (ok && got != ck) {
			t.Errorf("BlockFromPath(%q) = %q, %v; want ok=%v", c.rel, got, ok, c.ok)
		}
	}
	if BlockPath(ck) != "blocks/"+ck[0:2]+"/"+ck[2:4]+"/"+ck+".blk" {
		t.Fatal(BlockPath(ck))
	}
}

// TestBlocker: Longhorn's canAcquire: only a live lock of another type
// ranking first blocks; a taker absent from the listing cannot proceed.
func TestBlocker(t *testing.T) {
	now := time.Unix(10_000, 0)
	me := LockFile{Name: "lock-m", Type: LockDeletion}
	mine := SeenLock{LockFile: me, Time: now}
	older := SeenLock{LockFile: LockFile{Name: "lock-o", Type: LockBackup}, Time: now.Add(-time.Second)}
	sameType := SeenLock{LockFile: LockFile{Name: "lock-d", Type: LockDeletion, Acquired: true}, Time: now.Add(-time.Minute)}
	dead := SeenLock{LockFile: LockFile{Name: "lock-x", Type: LockBackup, Acquired: true}, Time: now.Add(-LockExpiry - time.Second)}
	newer := SeenLock{LockFile: LockFile{Name: "lock-n", Type: LockBackup}, Time: now.Add(time.Second)}
	if b, ok := Blocker([]SeenLock{mine, older, sameType, dead, newer}, me, now); !ok || b == nil || b.Name != "lock-o" {
		t.Fatalf("%+v %v, want lock-o", b, ok)
	}
	if b, ok := Blocker([]SeenLock{mine, sameType, dead, newer}, me, now); !ok || b != nil {
		t.Fatalf("%+v %v, want none", b, ok)
	}
	if _, ok := Blocker([]SeenLock{older}, me, now); ok {
		t.Fatal("a taker missing from the listing proceeded")
	}
	if !Expired(now, now.Add(-LockExpiry-time.Nanosecond)) || Expired(now, now.Add(-LockExpiry)) {
		t.Fatal("expiry is strictly more than LockExpiry")
	}
}
