// Command quickstart runs caretaker's main jobs on an embedded default: a
// throw-away Longhorn-style disk, backupstore, SPDK fake and token ring, all
// in a temporary directory that is removed at the end. It prints what it
// found, why each item is or is not an orphan, and what it did.
//
//	go run ./examples/quickstart
//
// Each package contributes one part, in its own file; parts lists them in
// the order they run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// part is one section of the quickstart report.
type part struct {
	title string // printed as the section heading
	run   func(ctx context.Context, w io.Writer, dir string) error
}

// parts are the quickstart's sections, in the order they run.
var parts = []part{
	{"Orphaned replica directories (packages orphan + diskscan)", runDiskscan},
	{"Orphaned v2 runtime objects (packages orphan + spdk)", runSPDK},
	{"Asynchronous backup deletion (package backupdelete)", runBackup},
	{"Offline replica rebuilding (package rebuild)", runRebuild},
	{"Cleanup after scaling (package tokenring)", runTokenRing},
}

func main() {
	keep := flag.Bool("keep", false, "keep the temporary directory instead of removing it")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	root, err := os.MkdirTemp("", "caretaker-quickstart-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
	if *keep {
		fmt.Printf("working in %s (kept)\n", root)
	} else {
		defer os.RemoveAll(root)
	}

	if err := run(ctx, os.Stdout, root); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		if !*keep {
			os.RemoveAll(root)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, root string) error {
	for i, p := range parts {
		dir, err := os.MkdirTemp(root, fmt.Sprintf("part%d-", i))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n=== %s ===\n", p.title)
		if err := p.run(ctx, w, dir); err != nil {
			return fmt.Errorf("%s: %w", p.title, err)
		}
	}
	return nil
}
