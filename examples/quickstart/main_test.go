package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQuickstartRunsEveryPart runs the whole quickstart as `go run` would
// and checks that every part printed its section, in the order parts
// lists them, and left nothing outside its temporary directory.
func TestQuickstartRunsEveryPart(t *testing.T) {
	if len(parts) == 0 {
		t.Fatalf("no quickstart parts")
	}
	root := t.TempDir()
	var out bytes.Buffer
	if err := run(context.Background(), &out, root); err != nil {
		t.Fatalf("quickstart failed: %v\n%s", err, out.String())
	}
	text := out.String()
	last := -1
	for _, p := range parts {
		i := strings.Index(text, "=== "+p.title+" ===")
		if i < 0 {
			t.Fatalf("section %q missing from the output:\n%s", p.title, text)
		}
		if i < last {
			t.Fatalf("section %q printed out of order", p.title)
		}
		last = i
	}
	if strings.Contains(text, root) {
		t.Errorf("the report prints the temporary path %s; it should not depend on where it runs", root)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "part") {
			t.Errorf("quickstart wrote %s outside its parts' directories", filepath.Join(root, e.Name()))
		}
	}
}
