package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	if code := run(context.Background(), append(args, "-purge-all"), &out, &errOut); code != 0 {
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
