//go:build linux

package fsstore

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestGetdentsListingMatchesRoot: on a volume with every kind of stray at
// every bucket level (symlinked buckets leading outside the volume, FIFOs,
// files where directories belong, look-alike names, blocks in the wrong
// bucket), the getdents listing finds exactly the block files the os.Root
// listing finds, and nothing through a symlink.
func TestGetdentsListingMatchesRoot(t *testing.T) {
	mount := t.TempDir()
	v := newLonghornVolume(t, mount, "vol-a")
	var want []string
	for i := range 300 {
		ck := checksum(string(rune('a'+i%26)) + string(rune(i)))
		v.block(ck)
		want = append(want, ck)
	}
	short := "abcd" // 4 digits: the shortest valid checksum
	v.write(filepath.Join("blocks", "ab", "cd", "abcd.blk"), "x")
	want = append(want, short)
	outside := t.TempDir()
	ckOut := checksum("outside")
	if err := os.MkdirAll(filepath.Join(outside, ckOut[2:4]), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, ckOut[2:4], ckOut+".blk"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	blocks := filepath.Join(v.dir, "blocks")
	ck := checksum("stray")
	for _, p := range []string{
		filepath.Join("blocks", want[0][0:2], want[0][2:4], checksum("wrong bucket")+".blk"),
		filepath.Join("blocks", want[0][0:2], want[0][2:4], want[0]+".blk.tmp"),
		filepath.Join("blocks", want[0][0:2], want[0][2:4], "ABCD.blk"),
		filepath.Join("blocks", "zz", "zz", "zzzz.blk"),
		filepath.Join("blocks", "abc", "de", "abcde.blk"),
		filepath.Join("blocks", ck[0:2], ck[2:4]), // a file where a directory belongs
	} {
		v.write(p, "x")
	}
	for _, l := range []struct{ link, target string }{
		{filepath.Join(blocks, ckOut[0:2]), outside},                                          // first level, outside
		{filepath.Join(blocks, want[1][0:2], ckOut[2:4]), filepath.Join(outside, ckOut[2:4])}, // second level
	} {
		if _, err := os.Lstat(l.link); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(l.link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(l.target, l.link); err != nil {
			t.Fatal(err)
		}
	}
	fifo := checksum("fifo")
	if err := os.MkdirAll(filepath.Join(blocks, fifo[0:2]), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(blocks, fifo[0:2], fifo[2:4]), 0o644); err != nil {
		t.Skip(err)
	}
	if err := syscall.Mkfifo(filepath.Join(blocks, "ee"), 0o644); err != nil && !os.IsExist(err) {
		t.Skip(err)
	}

	root, err := os.OpenRoot(v.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	sorted := func(l blockLists, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		l.each(func(ck []byte) { out = append(out, string(ck)) })
		slices.Sort(out)
		return out
	}
	got := sorted(listBlocks(root))
	portable := sorted(listBlocksWith(root, func(vol *os.Root, _ *os.File) (bucketLister, error) { return rootLister{vol}, nil }))
	slices.Sort(want)
	want = slices.Compact(want)
	if !slices.Equal(got, want) || !slices.Equal(portable, want) {
		t.Fatalf("getdents listing %d blocks, os.Root listing %d, want %d", len(got), len(portable), len(want))
	}
}
