package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
)

func TestDryRunThenPurge(t *testing.T) {
	base := t.TempDir()
	disk := filepath.Join(base, "disk")
	if err := diskscantest.NewDisk(disk, "disk-1", "uuid-1"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"pvc-1-0a1b2c3d", "pvc-2-4e5f6a7b"} {
		if err := diskscantest.MakeReplica(disk, n, diskscantest.Replica{Size: 4 << 20, Written: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	list := filepath.Join(base, "replicas.json")
	if err := os.WriteFile(list, []byte(`{"kind":"List","items":[{"metadata":{"name":"pvc-1-r-1"},"spec":{"nodeID":"node-1","diskID":"uuid-1","diskPath":"`+disk+`","dataDirectoryName":"pvc-1-0a1b2c3d"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-disk", disk, "-node", "node-1", "-replicas", list}

	var out, errOut bytes.Buffer
	if code := run(context.Background(), append(args, "-purge-all"), &out, &errOut); code != 3 || !strings.Contains(errOut.String(), "add -yes") {
		t.Fatalf("dry run exited %d: %s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"health: Ready", "1 expected, 1 orphaned", "orphan   pvc-2-4e5f6a7b", "dry run: would purge 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat(filepath.Join(disk, "replicas", "pvc-2-4e5f6a7b")); err != nil {
		t.Fatalf("dry run deleted: %v", err)
	}

	out.Reset()
	if code := run(context.Background(), append(args, "-purge", "pvc-1-0a1b2c3d", "-yes"), &out, &errOut); code != 1 {
		t.Fatalf("purge of an expected replica exited %d: %s", code, errOut.String())
	}

	out.Reset()
	if code := run(context.Background(), append(args, "-purge", "pvc-2-4e5f6a7b", "-yes"), &out, &errOut); code != 0 {
		t.Fatalf("purge exited %d: %s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "purged  pvc-2-4e5f6a7b") {
		t.Errorf("purge output:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(disk, "replicas", "pvc-2-4e5f6a7b")); !os.IsNotExist(err) {
		t.Fatalf("not purged: %v", err)
	}
	if _, err := os.Stat(filepath.Join(disk, "replicas", "pvc-1-0a1b2c3d", "volume.meta")); err != nil {
		t.Fatalf("expected replica touched: %v", err)
	}
}

// A FIFO given as the replica list, or found as the disk's config, is an
// error, not a hang: nothing writes to these FIFOs.
func TestNonRegularInputIsAnError(t *testing.T) {
	for _, c := range []struct{ name, fifo string }{{"replica list", "replicas.json"}, {"disk config", "disk/longhorn-disk.cfg"}} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			disk := filepath.Join(base, "disk")
			if err := diskscantest.NewDisk(disk, "disk-1", "uuid-1"); err != nil {
				t.Fatal(err)
			}
			list := filepath.Join(base, "replicas.json")
			if err := os.WriteFile(list, []byte(`{"items":[]}`), 0o644); err != nil {
				t.Fatal(err)
			}
			fifo := filepath.Join(base, c.fifo)
			if err := os.Remove(fifo); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { // release a reader left blocked, if any
				if fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					syscall.Close(fd)
				}
			})
			var out, errOut bytes.Buffer
			done := make(chan int, 1)
			go func() {
				done <- run(context.Background(), []string{"-disk", disk, "-node", "node-1", "-replicas", list}, &out, &errOut)
			}()
			select {
			case code := <-done:
				if code != 1 || !strings.Contains(errOut.String(), "not a regular file") {
					t.Fatalf("exit %d, stderr %q", code, errOut.String())
				}
			case <-time.After(20 * time.Second): // a safety net against a hang, not a timing assertion
				t.Fatal("the tool blocked on a FIFO")
			}
		})
	}
}

// An empty or suspicious replica list stops -purge and -purge-all unless
// the matching flag says so; an ordinary list (one of two directories
// orphaned) purges.
func TestSuspiciousListRefusesPurges(t *testing.T) {
	item := func(uuid, dir string) string {
		return `{"metadata":{"name":"r-` + dir + `"},"spec":{"nodeID":"node-1","diskID":"` + uuid + `","diskPath":"/x","dataDirectoryName":"` + dir + `"}}`
	}
	cases := []struct {
		name    string
		dirs    []string
		list    string
		flags   []string
		code    int
		say     string
		purged  []string
		survive []string
	}{
		{"empty list", []string{"pvc-1-0a1b2c3d", "pvc-2-4e5f6a7b"}, `{"items":[]}`,
			[]string{"-purge-all", "-yes"}, 4, "-allow-empty-expected", nil, []string{"pvc-1-0a1b2c3d", "pvc-2-4e5f6a7b"}},
		{"empty list, one purge", []string{"pvc-1-0a1b2c3d", "pvc-2-4e5f6a7b"}, `{"items":[]}`,
			[]string{"-purge", "pvc-1-0a1b2c3d", "-yes"}, 4, "kubectl get replicas.longhorn.io -n longhorn-system -o json", nil, []string{"pvc-1-0a1b2c3d"}},
		{"empty list, dry run", []string{"pvc-1-0a1b2c3d"}, `{"items":[]}`,
			[]string{"-purge-all"}, 4, "-allow-empty-expected", nil, []string{"pvc-1-0a1b2c3d"}},
		{"empty list, overridden", []string{"pvc-1-0a1b2c3d", "pvc-2-4e5f6a7b"}, `{"items":[]}`,
			[]string{"-purge-all", "-yes", "-allow-empty-expected"}, 0, "purged  pvc-2-4e5f6a7b", []string{"pvc-1-0a1b2c3d", "pvc-2-4e5f6a7b"}, nil},
		{"list of another disk, three unexpected", []string{"pvc-1-0a1b2c3d", "pvc-2-4e5f6a7b", "pvc-3-8c9d0e1f"}, `{"items":[` + item("uuid-1", "pvc-9-99999999") + `]}`,
			[]string{"-purge-all", "-yes"}, 4, "-allow-mass", nil, []string{"pvc-1-0a1b2c3d", "pvc-2-4e5f6a7b", "pvc-3-8c9d0e1f"}},
		{"three unexpected, overridden", []string{"pvc-1-0a1b2c3d", "pvc-2-4e5f6a7b", "pvc-3-8c9d0e1f"}, `{"items":[` + item("uuid-1", "pvc-9-99999999") + `]}`,
			[]string{"-purge-all", "-yes", "-allow-mass"}, 0, "reclaimed", []string{"pvc-1-0a1b2c3d", "pvc-2-4e5f6a7b", "pvc-3-8c9d0e1f"}, nil},
		{"two unexpected, below the mass threshold", []string{"pvc-1-0a1b2c3d", "pvc-2-4e5f6a7b"}, `{"items":[` + item("uuid-1", "pvc-9-99999999") + `]}`,
			[]string{"-purge-all", "-yes"}, 0, "purged  pvc-1-0a1b2c3d", []string{"pvc-1-0a1b2c3d", "pvc-2-4e5f6a7b"}, nil},
		{"one of two orphaned", []string{"pvc-1-0a1b2c3d", "pvc-2-4e5f6a7b"}, `{"items":[` + item("uuid-1", "pvc-1-0a1b2c3d") + `]}`,
			[]string{"-purge-all", "-yes"}, 0, "purged  pvc-2-4e5f6a7b", []string{"pvc-2-4e5f6a7b"}, []string{"pvc-1-0a1b2c3d"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			disk := filepath.Join(base, "disk")
			if err := diskscantest.NewDisk(disk, "disk-1", "uuid-1"); err != nil {
				t.Fatal(err)
			}
			for _, n := range c.dirs {
				if err := diskscantest.MakeReplica(disk, n, diskscantest.Replica{}); err != nil {
					t.Fatal(err)
				}
			}
			list := filepath.Join(base, "replicas.json")
			if err := os.WriteFile(list, []byte(c.list), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			args := append([]string{"-disk", disk, "-node", "node-1", "-replicas", list}, c.flags...)
			code := run(context.Background(), args, &out, &errOut)
			if code != c.code || !strings.Contains(out.String()+errOut.String(), c.say) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s%s", code, c.code, c.say, out.String(), errOut.String())
			}
			for _, n := range c.purged {
				if _, err := os.Stat(filepath.Join(disk, "replicas", n)); !os.IsNotExist(err) {
					t.Errorf("%s not purged: %v", n, err)
				}
			}
			for _, n := range c.survive {
				if _, err := os.Stat(filepath.Join(disk, "replicas", n, "volume.meta")); err != nil {
					t.Errorf("%s lost: %v", n, err)
				}
			}
		})
	}
}

func TestHelpShowsTheKubectlCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out.String(), "kubectl get replicas.longhorn.io -n longhorn-system -o json") {
		t.Fatalf("help lacks the kubectl command:\n%s", out.String())
	}
}
