//go:build linux && (amd64 || arm64)

package diskscan

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
)

// TestValidateAtMatchesRoot is the differential test of the descriptor
// path (validateAt) against the root path (validateRoot, the reference):
// for every shape an unexpected entry can have (a replica, a replica with
// subdirectories and symbolic links inside, one nested deeper than
// maxTreeDepth, missing, corrupt, oversized, empty or null-keyed
// volume.meta, volume.meta as a directory, FIFO, socket, device or
// symbolic link, an entry that is a file, a FIFO, a symbolic link or
// gone), both find the same: present or not, the reason, the meta, the
// allocated bytes, the identity and the cache action; and with the first
// finding as the cached one, both reuse it alike.
func TestValidateAtMatchesRoot(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	rd := filepath.Join(d.Path, ReplicasDir)
	meta := func(name string) string { return filepath.Join(rd, name, MetaFile) }
	write := func(p, s string) { must(t, os.WriteFile(p, []byte(s), 0o644)) }
	shapes := map[string]func(name string){
		"plain":   func(string) {},
		"noimage": nil,
		"nometa":  func(name string) { must(t, os.Remove(meta(name))) },
		"corrupt": func(name string) { write(meta(name), `{"Size":1`) },
		"nullkey": func(name string) {
			write(meta(name), strings.Replace(string(disktest.Meta(1)), `"Head":"volume-head-000.img"`, `"Head":null`, 1))
		},
		"empty":    func(name string) { write(meta(name), "") },
		"toolarge": func(name string) { write(meta(name), string(disktest.Meta(1))+strings.Repeat(" ", 300)) },
		"atlimit": func(name string) {
			write(meta(name), string(disktest.Meta(1))+strings.Repeat(" ", 256-len(disktest.Meta(1))))
		},
		"metadir":  func(name string) { must(t, os.Remove(meta(name))); must(t, os.Mkdir(meta(name), 0o755)) },
		"metafifo": func(name string) { mkfifo(t, meta(name)) },
		"metasock": func(name string) { mknod(t, meta(name), syscall.S_IFSOCK, 0) },
		"metachr":  func(name string) { mknod(t, meta(name), syscall.S_IFCHR, 1<<8|5) },
		"metalink": func(name string) {
			must(t, os.Remove(meta(name)))
			must(t, os.Symlink(meta("pvc-plain-r-00000000"), meta(name)))
		},
		"entryfile": func(name string) {
			must(t, os.RemoveAll(filepath.Join(rd, name)))
			write(filepath.Join(rd, name), "{}")
		},
		"entryfifo": func(name string) { must(t, os.RemoveAll(filepath.Join(rd, name))); mkfifo(t, filepath.Join(rd, name)) },
		"entrylink": func(name string) {
			must(t, os.RemoveAll(filepath.Join(rd, name)))
			must(t, os.Symlink("pvc-plain-r-00000000", filepath.Join(rd, name)))
		},
		"gone": func(name string) { must(t, os.RemoveAll(filepath.Join(rd, name))) },
		"nested": func(name string) {
			dir := filepath.Join(rd, name)
			must(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755))
			write(filepath.Join(dir, "a", "x.img"), strings.Repeat("x", 10000))
			write(filepath.Join(dir, "a", "b", "y.img"), strings.Repeat("y", 20000))
			must(t, os.Symlink(filepath.Join(rd, "pvc-plain-r-00000000"), filepath.Join(dir, "a", "elsewhere")))
			must(t, os.Symlink("volume.meta", filepath.Join(dir, "link.meta")))
			mkfifo(t, filepath.Join(dir, "a", "fifo"))
		},
		"deep": func(name string) {
			p := filepath.Join(rd, name)
			for i := range maxTreeDepth + 3 {
				p = filepath.Join(p, fmt.Sprint(i))
				must(t, os.Mkdir(p, 0o755))
				write(filepath.Join(p, "f"), strings.Repeat("z", 5000))
			}
		},
	}
	var names []string
	for shape, mutate := range shapes {
		name := fmt.Sprintf("pvc-%s-r-%08d", shape, 0)
		replica(t, d, name, disktest.Replica{Size: 1 << 20, Written: 12345, NoImage: shape == "noimage"})
		if mutate != nil {
			mutate(name)
		}
		names = append(names, name)
	}
	for _, opts := range []Options{settled, {}, {MaxMetaSize: 256, Clock: settled.Clock}} {
		o := newOrphans(t, NewStaticExpected(), opts, d)
		o.racyAfter = o.clock.Now().Add(-RacyWindow).UnixNano()
		root, err := os.OpenRoot(rd)
		must(t, err)
		dir, err := root.Open(".")
		must(t, err)
		dirfd := validationFd(dir)
		dir.Close()
		if dirfd < 0 {
			t.Fatal("no descriptor to validate with")
		}
		var bufs validateBufs
		ctx := context.Background()
		for _, name := range names {
			want := o.validateRoot(ctx, root, nil, name)
			got := within(t, "validateAt", func() validation {
				got, ok := o.validateAt(ctx, root, dirfd, &bufs, nil, name)
				if !ok {
					t.Errorf("%s (max %d): the descriptor path cannot tell", name, opts.MaxMetaSize)
				}
				return got
			})
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s (max %d):\ndescriptors %+v %+v\nroot        %+v %+v", name, opts.MaxMetaSize, got, got.entry, want, want.entry)
			}
			if want.entry == nil {
				continue
			}
			// With the root path's finding cached, both reuse it alike.
			again, _ := o.validateAt(ctx, root, dirfd, &bufs, want.entry, name)
			if ref := o.validateRoot(ctx, root, want.entry, name); !reflect.DeepEqual(again, ref) || (ref.entry == want.entry) != (again.entry == want.entry) {
				t.Errorf("%s with a cached entry: descriptors %+v, root %+v", name, again, ref)
			}
		}
		closeValidationFd(dirfd)
		root.Close()
	}
}

// TestValidateAtNeverFollowsTheEntry: an entry that is a symbolic link to
// a valid replica is "not a directory" on the descriptor path, and its
// target's volume.meta is never read.
func TestValidateAtNeverFollowsTheEntry(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	rd := filepath.Join(d.Path, ReplicasDir)
	replica(t, d, "pvc-real-r-00000001", disktest.Replica{})
	must(t, os.Symlink(filepath.Join(rd, "pvc-real-r-00000001"), filepath.Join(rd, "pvc-link-r-00000002")))
	o := newOrphans(t, NewStaticExpected(), settled, d)
	root, err := os.OpenRoot(rd)
	must(t, err)
	defer root.Close()
	dir, err := root.Open(".")
	must(t, err)
	dirfd := validationFd(dir)
	dir.Close()
	defer closeValidationFd(dirfd)
	var bufs validateBufs
	v, ok := o.validateAt(context.Background(), root, dirfd, &bufs, nil, "pvc-link-r-00000002")
	if !ok || !v.present || v.entry.reason != "not a directory" || o.metaReads.Load() != 0 {
		t.Fatalf("a symbolic link to a replica: %+v %+v, %d volume.meta reads", v, v.entry, o.metaReads.Load())
	}
}
