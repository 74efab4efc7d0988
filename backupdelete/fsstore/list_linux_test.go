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
	sorted := func(l *blockList, err error) []string {
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

// TestUntypedEntryIsABlockFileOnlyIfRegular: where getdents gives no type
// (DT_UNKNOWN, as some filesystems do), a block name counts as a block
// file only when Lstat finds a regular file with the inode getdents gave:
// not a FIFO, a symlink or a directory, and not a file whose inode does
// not match (the path led somewhere else).
func TestUntypedEntryIsABlockFileOnlyIfRegular(t *testing.T) {
	mount := t.TempDir()
	v := newLonghornVolume(t, mount, "vol-a")
	reg := checksum("regular")
	v.block(reg)
	bucket := filepath.Join(v.dir, "blocks", reg[0:2], reg[2:4])
	fifo, link, dir := sameBucket(reg, "fifo"), sameBucket(reg, "link"), sameBucket(reg, "dir")
	v.mkfifo(filepath.Join("blocks", reg[0:2], reg[2:4], fifo+".blk"))
	if err := os.Symlink(reg+".blk", filepath.Join(bucket, link+".blk")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(bucket, dir+".blk"), 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(v.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ino := func(name string) uint64 {
		info, err := os.Lstat(filepath.Join(bucket, name))
		if err != nil {
			t.Fatal(err)
		}
		return uint64(info.Sys().(*syscall.Stat_t).Ino)
	}
	l := &getdentsLister{vol: root}
	a, b := reg[0:2], reg[2:4]
	for _, c := range []struct {
		name string
		typ  uint8
		ino  uint64
		want bool
	}{
		{reg + ".blk", syscall.DT_UNKNOWN, ino(reg + ".blk"), true},
		{reg + ".blk", syscall.DT_UNKNOWN, ino(reg+".blk") + 1, false},
		{reg + ".blk", syscall.DT_REG, 0, true},
		{fifo + ".blk", syscall.DT_UNKNOWN, ino(fifo + ".blk"), false},
		{link + ".blk", syscall.DT_UNKNOWN, ino(link + ".blk"), false},
		{link + ".blk", syscall.DT_UNKNOWN, ino(reg + ".blk"), false},
		{dir + ".blk", syscall.DT_UNKNOWN, ino(dir + ".blk"), false},
		{fifo + ".blk", syscall.DT_FIFO, 0, false},
		{link + ".blk", syscall.DT_LNK, 0, false},
		{dir + ".blk", syscall.DT_DIR, 0, false},
		{sameBucket(reg, "gone") + ".blk", syscall.DT_UNKNOWN, 1, false},
	} {
		if got := l.regular(a, b, []byte(c.name), c.typ, c.ino); got != c.want {
			t.Errorf("%s.. typ %d ino %d: regular %v, want %v", c.name[:8], c.typ, c.ino, got, c.want)
		}
	}
}

// TestOpenatShortAndLongNames checks the allocation-free openat against
// syscall.Openat's behaviour: a bucket-length name and a long one open
// the same directory, a name with a NUL is refused, a symlink is refused
// with O_NOFOLLOW, and bucketNames are the 256 bucket names in order.
func TestOpenatShortAndLongNames(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"ab", "a-longer-name"} {
		if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("ab", filepath.Join(dir, "cd")); err != nil {
		t.Fatal(err)
	}
	parent, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(parent)
	for _, n := range []string{"ab", "a-longer-name"} {
		fd, err := openat(parent, n, subdirFlags)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		var got, want syscall.Stat_t
		if err := syscall.Fstat(fd, &got); err != nil {
			t.Fatal(err)
		}
		syscall.Close(fd)
		if err := syscall.Lstat(filepath.Join(dir, n), &want); err != nil {
			t.Fatal(err)
		}
		if got.Ino != want.Ino {
			t.Fatalf("%s: opened inode %d, want %d", n, got.Ino, want.Ino)
		}
	}
	for _, n := range []string{"a\x00b", "ab\x00", "cd", "zz"} {
		if fd, err := openat(parent, n, subdirFlags); err == nil {
			syscall.Close(fd)
			t.Fatalf("%q opened", n)
		}
	}
	if _, err := openat(parent, "cd", oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW); err != syscall.ENOTDIR {
		t.Fatalf("O_PATH open of a symlinked bucket: %v, want ENOTDIR", err)
	}
	for i, n := range bucketNames {
		if !bucketName(n) || shardOf([]byte(n)) != i {
			t.Fatalf("bucketNames[%d] = %q", i, n)
		}
	}
}
