package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
)

// prepare creates, under dir, a throw-away Longhorn v1 disk and the
// replica list of a cluster that expects one of its three replica
// directories, so the tool can be tried without a node: dir/disk and
// dir/replicas.json. It refuses a dir that exists and is not empty.
func prepare(w io.Writer, dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("-prepare %s: the directory is not empty; give a new one", dir)
	}
	disk := filepath.Join(dir, "disk")
	if err := diskscantest.NewDisk(disk, "disk-1", "4f3c2b1a-0000-4000-8000-000000000001"); err != nil {
		return fmt.Errorf("-prepare: %w", err)
	}
	for _, r := range []struct {
		name string
		size int64
	}{
		{"pvc-web-8f2c4d1a", 4 << 20}, // expected by replica pvc-web-r-1
		{"pvc-old-3c4d5e6f", 2 << 20}, // its volume was deleted while the node was down
		{"pvc-tmp-9a8b7c6d", 1 << 20}, // likewise
	} {
		if err := diskscantest.MakeReplica(disk, r.name, diskscantest.Replica{Size: r.size, Written: r.size / 2}); err != nil {
			return fmt.Errorf("-prepare: %w", err)
		}
	}
	list := fmt.Sprintf(`{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "longhorn.io/v1beta2", "kind": "Replica", "metadata": {"name": "pvc-web-r-1", "namespace": "longhorn-system"},
   "spec": {"nodeID": "node-1", "diskID": "4f3c2b1a-0000-4000-8000-000000000001", "diskPath": %q, "dataDirectoryName": "pvc-web-8f2c4d1a"}}
]}
`, disk)
	replicas := filepath.Join(dir, "replicas.json")
	if err := os.WriteFile(replicas, []byte(list), 0o644); err != nil {
		return fmt.Errorf("-prepare: %w", err)
	}
	fmt.Fprintf(w, "prepared a disk with 3 replica directories, 1 of them expected, in %s\n", disk)
	fmt.Fprintf(w, "and its cluster's replica list in %s; try:\n", replicas)
	fmt.Fprintf(w, "  longhorn-disk -disk %s -node node-1 -replicas %s\n", disk, replicas)
	return nil
}
