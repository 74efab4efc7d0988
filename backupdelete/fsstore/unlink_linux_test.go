//go:build linux

package fsstore

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestGroupRemoverMatchesRoot builds the same messy blocks tree twice and
// removes the same candidates with the Linux remover and with the os.Root
// one: a block present, one already gone, one whose second-level or
// first-level bucket is gone, an empty and a non-empty directory at a
// block's name, a FIFO and a file where a bucket belongs. Both must
// report the same removed count and failures and leave the same files,
// and neither removes a directory at a block's name, empty or not: only
// a regular file is a block file (it is neither removed nor failed).
// A symlinked bucket is the one difference, by design: the Linux remover
// never follows it (the block behind it stays, and is reported), where
// os.Root follows one that stays inside the first-level bucket.
func TestGroupRemoverMatchesRoot(t *testing.T) {
	ck := func(s string) string { return checksum(s) }
	present, gone, noL2, noL1 := ck("present"), ck("gone"), ck("no-l2"), ck("no-l1")
	emptyDir, fullDir, fifoL2, fileL2, linked := ck("empty-dir"), ck("full-dir"), ck("fifo"), ck("file"), ck("linked")
	build := func(t *testing.T) (*os.Root, string) {
		dir := t.TempDir()
		blocks := filepath.Join(dir, "blocks")
		mk := func(rel string) {
			if err := os.MkdirAll(filepath.Join(blocks, rel), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		file := func(rel string) {
			mk(filepath.Dir(rel))
			if err := os.WriteFile(filepath.Join(blocks, rel), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []string{present} {
			file(filepath.Join(c[0:2], c[2:4], c+".blk"))
		}
		file(filepath.Join(fullDir[0:2], fullDir[2:4], fullDir+".blk", "x"))
		mk(filepath.Join(gone[0:2], gone[2:4]))
		mk(noL2[0:2])
		mk(filepath.Join(emptyDir[0:2], emptyDir[2:4], emptyDir+".blk"))
		mk(fifoL2[0:2])
		if err := syscall.Mkfifo(filepath.Join(blocks, fifoL2[0:2], fifoL2[2:4]), 0o644); err != nil {
			t.Skip(err)
		}
		file(filepath.Join(fileL2[0:2], fileL2[2:4]))
		file(filepath.Join("elsewhere", linked+".blk"))
		mk(linked[0:2])
		if err := os.Symlink("../elsewhere", filepath.Join(blocks, linked[0:2], linked[2:4])); err != nil {
			t.Fatal(err)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { root.Close() })
		return root, blocks
	}
	cands := []string{present, gone, noL2, noL1, emptyDir, fullDir, fifoL2, fileL2}
	left := func(blocks string) []string {
		var out []string
		filepath.Walk(blocks, func(p string, info os.FileInfo, err error) error {
			if err == nil {
				rel, _ := filepath.Rel(blocks, p)
				out = append(out, rel)
			}
			return nil
		})
		return out
	}
	run := func(t *testing.T, linux bool, cands []string) (int, []string, []string) {
		root, blocks := build(t)
		var removed int
		var failed []string
		if linux {
			removed, failed = removeBlocks(context.Background(), root, cands)
		} else {
			r := rootGroupRemover(root)
			for _, c := range cands {
				n, bad := r(context.Background(), []string{c})
				removed += n
				failed = append(failed, bad...)
			}
		}
		slices.Sort(failed)
		return removed, failed, left(blocks)
	}
	n1, f1, l1 := run(t, true, cands)
	n2, f2, l2 := run(t, false, cands)
	if n1 != n2 || !slices.Equal(f1, f2) || !slices.Equal(l1, l2) {
		t.Fatalf("linux: %d removed, failed %q, left %q\nroot: %d removed, failed %q, left %q", n1, f1, l1, n2, f2, l2)
	}
	if n1 != 4 || len(f1) != 2 {
		t.Fatalf("%d removed, failed %q; want 4 removed (present, gone, no-l2, no-l1) and 2 failed (fifo, file)", n1, f1)
	}
	for _, kept := range []string{
		filepath.Join(emptyDir[0:2], emptyDir[2:4], emptyDir+".blk"),
		filepath.Join(fullDir[0:2], fullDir[2:4], fullDir+".blk", "x"),
	} {
		if !slices.Contains(l1, kept) {
			t.Fatalf("%s was removed; left %q", kept, l1)
		}
	}
	root, blocks := build(t)
	n, failed := removeBlocks(context.Background(), root, []string{linked})
	if n != 0 || len(failed) != 1 {
		t.Fatalf("through a symlinked bucket: %d removed, failed %q; want it refused", n, failed)
	}
	if _, err := os.Stat(filepath.Join(blocks, "elsewhere", linked+".blk")); err != nil {
		t.Fatalf("the block behind the symlinked bucket was removed: %v", err)
	}
}
