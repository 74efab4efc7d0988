// Command backup-delete points at a backupstore in Longhorn's layout,
// either a directory (for example an NFS mount that Longhorn backs up to)
// or an S3 backup target, lists its volumes and backups, and deletes one
// backup asynchronously through backupdelete's Driver, printing each state
// transition. It is a dry run unless -yes is given: the dry run shows
// which block files the deletion would free.
//
//	go run ./examples/backup-delete -dir /mnt/backupstore
//	go run ./examples/backup-delete -dir /mnt/backupstore -volume pvc-1234 -backup backup-0123456789abcdef
//	go run ./examples/backup-delete -dir /mnt/backupstore -volume pvc-1234 -backup backup-0123456789abcdef -yes
//
// An S3 target is Longhorn's backup-target URL, s3://bucket@region/path,
// with the credentials and settings of Longhorn's backup-target secret in
// the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, and for an
// S3-compatible store AWS_ENDPOINTS (plus AWS_CERT, VIRTUAL_HOSTED_STYLE,
// HTTP_PROXY, HTTPS_PROXY, NO_PROXY, AWS_SESSION_TOKEN as needed):
//
//	AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... AWS_ENDPOINTS=https://minio.example:9000 \
//	  go run ./examples/backup-delete -target s3://backups@us-east-1/longhorn -volume pvc-1234 -backup backup-0123456789abcdef
//
// A -dir that does not hold backupstore/volumes/ is refused with an error
// naming the path it expected, and the command exits 1. A dry run of a
// deletion (-backup without -yes) exits 3, after saying what it would
// free: nothing was deleted. Exit codes: 0 done (or nothing to do), 1
// failed, 2 bad usage, 3 dry run that would delete, 4 refused by a safety
// rule (the volume's lock held by a backup or restore, a backup still in
// progress).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/fsstore"
	"github.com/caretaker-storage/caretaker/examples/internal/cli"
	"github.com/caretaker-storage/caretaker/internal/safefile"
)

var command = cli.Command{
	Name: "backup-delete",
	Usage: "backup-delete -dir MOUNT [-volume VOLUME -backup BACKUP [-yes]] [-lock-wait D]\n" +
		"       backup-delete -target s3://BUCKET@REGION/PATH [-volume VOLUME -backup BACKUP [-yes]] [-lock-wait D]\n" +
		"       backup-delete -prepare DIR|s3://BUCKET@REGION/PATH",
	About: "backup-delete points at a backupstore in Longhorn's layout, a directory (for example the NFS mount " +
		"Longhorn backs up to) or an S3 backup target (-target, with the credentials of Longhorn's backup-target " +
		"secret in the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINTS for an S3-compatible " +
		"store, AWS_CERT, VIRTUAL_HOSTED_STYLE, HTTP_PROXY, HTTPS_PROXY, NO_PROXY), lists its volumes and backups, " +
		"and deletes one backup asynchronously through " +
		"backupdelete's Driver, printing each state transition. Without -yes a deletion is a dry run: it says " +
		"which block files the deletion would free, deletes nothing and exits 3.",
	Refusals: []error{backupdelete.ErrLocked, backupdelete.ErrInProgress},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := runCommand(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// runCommand is the tool's command line: it parses args and returns the
// exit code.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := command.FlagSet()
	dir := fs.String("dir", "", "the backupstore mount point (the directory holding backupstore/) (this or -target)")
	target := fs.String("target", "", "an S3 backup target, s3://bucket@region/path, as Longhorn's backup-target setting (this or -dir)")
	volume := fs.String("volume", "", "the volume of the backup to delete (with -backup)")
	backup := fs.String("backup", "", "the backup to delete (with -volume); without -yes, a dry run")
	yes := fs.Bool("yes", false, "really delete the -backup (default: dry run)")
	prepareDir := fs.String("prepare", "", "create a throw-away backupstore to try the tool on, in this new `directory` or on this S3 backup target (s3://bucket@region/path), and print how")
	lockWait := fs.Duration("lock-wait", time.Minute, "how long to wait for a backup or restore holding the volume's lock")
	if err := command.Parse(fs, args, stdout, stderr); err != nil {
		return command.Exit(err, stderr)
	}
	switch {
	case *prepareDir != "" && fs.NFlag() > 1:
		return command.Exit(cli.Usagef("-prepare takes no other flag"), stderr)
	case *prepareDir != "":
		return command.Exit(prepare(ctx, stdout, *prepareDir, os.Getenv), stderr)
	case *dir == "" && *target == "":
		return command.Exit(cli.Usagef("-dir is required (or -target for an S3 backup target)"), stderr)
	case *dir != "" && *target != "":
		return command.Exit(cli.Usagef("-dir and -target both name the backupstore: give one"), stderr)
	case *backup != "" && *volume == "":
		return command.Exit(cli.Usagef("-backup %s needs -volume, the backup's volume", *backup), stderr)
	case *volume != "" && *backup == "":
		return command.Exit(cli.Usagef("-volume %s needs -backup, the backup to delete (to list, give -dir alone)", *volume), stderr)
	case *yes && *backup == "":
		return command.Exit(cli.YesWithout(true, "a deletion (-volume and -backup)"), stderr)
	}
	if *target != "" {
		return command.Exit(runS3(ctx, stdout, *target, os.Getenv, *volume, *backup, *yes, *lockWait), stderr)
	}
	return command.Exit(run(ctx, stdout, *dir, *volume, *backup, *yes, *lockWait), stderr)
}

func run(ctx context.Context, w io.Writer, dir, volume, backup string, yes bool, lockWait time.Duration) error {
	if err := checkRoot(dir); err != nil {
		return err
	}
	store, err := fsstore.New(fsstore.Options{Dir: dir, LockWait: lockWait})
	if err != nil {
		return err
	}
	defer store.Close()
	return runOn(ctx, w, store, volume, backup, yes)
}

// backupStore is what the tool needs of a backupstore: fsstore.Store and
// s3store.Store both have it.
type backupStore interface {
	backupdelete.Backupstore
	Volumes(ctx context.Context) ([]string, error)
	Backups(ctx context.Context, volume string) ([]string, error)
	BlockFiles(ctx context.Context, volume string) (int, error)
	ReadBackup(ctx context.Context, ref backupdelete.BackupRef) (fsstore.Backup, error)
}

// runOn lists the store and, given a backup, deletes it (or says what it
// would free).
func runOn(ctx context.Context, w io.Writer, store backupStore, volume, backup string, yes bool) error {
	if err := list(ctx, w, store); err != nil {
		return err
	}
	if backup == "" {
		return nil
	}
	ref := backupdelete.BackupRef{Volume: volume, Name: backup}
	if err := ref.Validate(); err != nil {
		return cli.Usagef("-volume or -backup: %w", err) // a malformed flag value is bad usage
	}
	freed, err := wouldFree(ctx, store, ref)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\ndeleting %s would free %s\n", ref, cli.Count(freed, "block file"))
	if !yes {
		fmt.Fprintln(w, "dry run: pass -yes to delete")
		return cli.DryRun("deleted")
	}
	return deleteAsync(ctx, w, store, ref)
}

// errNotBackupstore: -dir is not the root of a backupstore in Longhorn's
// layout.
var errNotBackupstore = errors.New("not a backupstore root")

// checkRoot refuses a -dir that does not hold backupstore/volumes/ (the
// layout's fsstore.BaseDir and its volumes directory): any other directory
// would list as "0 volumes" and look like an empty backupstore. Each
// level is checked with Lstat, so a FIFO there is reported, not opened.
func checkRoot(dir string) error {
	info, err := os.Stat(dir) // the mount point itself may be a symlink
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errNotBackupstore, dir, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("%w: %s is %s, not a directory", errNotBackupstore, dir, safefile.Describe(info.Mode()))
	}
	for _, rel := range []string{fsstore.BaseDir, fsstore.BaseDir + "/volumes"} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		info, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			hint := ""
			if sub, err := os.Lstat(filepath.Join(dir, "volumes")); err == nil && sub.IsDir() && filepath.Base(filepath.Clean(dir)) == fsstore.BaseDir {
				hint = "; this looks like the backupstore directory itself: pass its parent, the mount point"
			}
			return fmt.Errorf("%w: %s: expected the directory %s (Longhorn's layout: <mount>/backupstore/volumes/<c[0:2]>/<c[2:4]>/<volume>/), found nothing there%s",
				errNotBackupstore, dir, p, hint)
		case err != nil:
			return fmt.Errorf("%w: %s: %v", errNotBackupstore, dir, err)
		case !info.IsDir():
			return fmt.Errorf("%w: %s: expected the directory %s, but it is %s, not a directory", errNotBackupstore, dir, p, safefile.Describe(info.Mode()))
		}
	}
	return nil
}

// list prints every volume with its backups.
func list(ctx context.Context, w io.Writer, store backupStore) error {
	vols, err := store.Volumes(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, cli.Count(len(vols), "volume"))
	for _, v := range vols {
		names, err := store.Backups(ctx, v)
		if err != nil {
			return err
		}
		blocks, err := store.BlockFiles(ctx, v)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %s: %s, %s\n", v, cli.Count(len(names), "backup"), cli.Count(blocks, "block file"))
		for _, n := range names {
			b, err := store.ReadBackup(ctx, backupdelete.BackupRef{Volume: v, Name: n})
			switch {
			case err != nil:
				fmt.Fprintf(w, "    %s  unreadable: %v\n", n, err)
			case b.InProgress():
				fmt.Fprintf(w, "    %s  in progress\n", n)
			default:
				fmt.Fprintf(w, "    %s  created %s, %s\n", n, b.CreatedTime, cli.Count(len(b.Blocks), "block"))
			}
		}
	}
	return nil
}

// wouldFree counts the blocks only ref references.
func wouldFree(ctx context.Context, store backupStore, ref backupdelete.BackupRef) (int, error) {
	target, err := store.ReadBackup(ctx, ref)
	if err != nil {
		return 0, err
	}
	names, err := store.Backups(ctx, ref.Volume)
	if err != nil {
		return 0, err
	}
	own := map[string]bool{}
	for _, m := range target.Blocks {
		own[m.BlockChecksum] = true
	}
	for _, n := range names {
		if n == ref.Name {
			continue
		}
		b, err := store.ReadBackup(ctx, backupdelete.BackupRef{Volume: ref.Volume, Name: n})
		if err != nil {
			return 0, fmt.Errorf("backup %s is unreadable, so no block would be collected: %w", n, err)
		}
		for _, m := range b.Blocks {
			delete(own, m.BlockChecksum)
		}
	}
	return len(own), nil
}

// deleteAsync runs the Driver's loop for one backup, as a controller
// would, printing each transition. Unlike a controller it gives up when
// the deletion failed on the volume's lock (a backup or restore held it
// past -lock-wait): that is a refusal, and a script may try again later.
func deleteAsync(ctx context.Context, w io.Writer, store backupStore, ref backupdelete.BackupRef) error {
	wake := make(chan struct{}, 1)
	var mu sync.Mutex
	var lastErr error // the last deletion's outcome, from OnDone
	drv, err := backupdelete.NewDriver(store, backupdelete.DriverOptions{
		OnDone: func(_ backupdelete.BackupRef, err error) {
			mu.Lock()
			lastErr = err
			mu.Unlock()
			select {
			case wake <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		return err
	}
	defer drv.Close()

	state, msg := backupdelete.StateCompleted, ""
	fmt.Fprintf(w, "%s %s\n", time.Now().Format(time.TimeOnly), state)
	for {
		res, err := drv.Reconcile(ctx, backupdelete.Request{Ref: ref, State: state, Message: msg})
		if errors.Is(err, backupdelete.ErrInvalidRef) || errors.Is(err, backupdelete.ErrClosed) {
			return err
		}
		if err != nil {
			fmt.Fprintln(w, "  (check failed, retrying:", err, ")")
		}
		if res.Finalize {
			fmt.Fprintf(w, "%s deleted\n", time.Now().Format(time.TimeOnly))
			return nil
		}
		if res.State != state || res.Message != msg {
			line := fmt.Sprintf("%s %s -> %s", time.Now().Format(time.TimeOnly), state, res.State)
			if res.Message != "" {
				line += " " + res.Message
			}
			fmt.Fprintln(w, line)
		}
		mu.Lock()
		done := lastErr
		mu.Unlock()
		if res.State.Failed() && errors.Is(done, backupdelete.ErrLocked) {
			return fmt.Errorf("nothing was deleted: %w", done)
		}
		state, msg = res.State, res.Message
		t := time.NewTimer(time.Until(res.RequeueAt))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-wake:
			t.Stop()
		case <-t.C:
		}
	}
}
