// Command quickstart runs caretaker's main jobs on an embedded default: a
// throw-away Longhorn-style disk, backupstore, SPDK fake and token ring, all
// in a temporary directory that is removed at the end. It prints what it
// found, why each item is or is not an orphan, and what it did.
//
//	go run ./examples/quickstart
//
// With -backup-target, the backup part runs on an S3 backup target
// instead (Longhorn's URL, s3://bucket@region/path, with the credentials
// of Longhorn's backup-target secret in the environment: AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_ENDPOINTS for an S3-compatible store). It
// writes a throw-away volume there and deletes its backups again.
//
// Each package contributes one part, in its own file; parts lists them in
// the order they run.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/caretaker-storage/caretaker/examples/internal/cli"
)

// part is one section of the quickstart report.
type part struct {
	title string // printed as the section heading
	run   func(ctx context.Context, w io.Writer, dir string) error
}

// parts are the quickstart's sections, in the order they run.
var parts = []part{
	{"Orphaned replica directories (packages orphan + diskscan)", runDiskscan},
	{"The last copy of a faulted volume (packages salvage + orphan)", runLastCopy},
	{"Orphaned v2 runtime objects (packages orphan + spdk)", runSPDK},
	{"Asynchronous backup deletion (package backupdelete)", runBackupPart},
	{"Offline replica rebuilding (package rebuild)", runRebuild},
	{"Cleanup after scaling (package tokenring)", runTokenRing},
}

var command = cli.Command{
	Name:  "quickstart",
	Usage: "quickstart [-keep] [-backup-target s3://BUCKET@REGION/PATH]",
	About: "quickstart runs caretaker's main jobs on an embedded default: a throw-away Longhorn-style disk, " +
		"backupstore, SPDK fake and token ring, all in a temporary directory that is removed at the end. " +
		"It prints what it found, why each item is or is not an orphan, and what it did. " +
		"It touches nothing outside its temporary directory, unless -backup-target names an S3 backup target " +
		"(credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINTS, as Longhorn's backup-target " +
		"secret has them): the backup part then writes a throw-away volume there and deletes its backups again, " +
		"leaving its volume.cfg.",
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	code := runCommand(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}

// runCommand is the tool's command line: it parses args and returns the
// exit code.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := command.FlagSet()
	keep := fs.Bool("keep", false, "keep the temporary directory instead of removing it")
	fs.StringVar(&backupTarget, "backup-target", "", "run the backup part on this S3 backup target, s3://bucket@region/path (default: a temporary directory)")
	if err := command.Parse(fs, args, stdout, stderr); err != nil {
		return command.Exit(err, stderr)
	}
	root, err := os.MkdirTemp("", "caretaker-quickstart-")
	if err != nil {
		return command.Exit(err, stderr)
	}
	if *keep {
		fmt.Fprintf(stdout, "working in %s (kept)\n", root)
	} else {
		defer os.RemoveAll(root)
	}
	return command.Exit(run(ctx, stdout, root), stderr)
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
