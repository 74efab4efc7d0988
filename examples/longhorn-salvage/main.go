// Command longhorn-salvage finds, among the replica directories left on
// Longhorn v1 disks, the copies of a volume whose data can still be read
// back, ranks them the way the engine judges freshness, and exports the
// best one as a raw disk image. It never changes anything on the disks.
//
//	longhorn-salvage -disk /var/lib/longhorn/ -disk /mnt/disk2/ [-volume NAME] [-json]
//	longhorn-salvage -export /var/lib/longhorn/replicas/pvc-1-0a1b2c3d -o /backup/pvc-1.img
//	longhorn-salvage -prepare /tmp/salvage-demo
//
// Listing prints one entry per directory under <disk>/replicas: its
// volume (from the directory's name), whether it is recoverable and why
// not, and its rank among the copies of its volume (1 = the best
// recoverable copy; 0 = not recoverable). -json prints the same as a JSON
// array of objects with at least "dir", "volume", "recoverable", "rank"
// and "reasons".
//
// Exporting writes exactly the volume's size in bytes, sparse, and prints
// the image's SHA-256 in sha256sum's format. It refuses (exit 4, nothing
// written) a copy that is not recoverable unless -force, an output path
// inside the replica's disk or any -disk, and an existing output file
// unless -overwrite. -dry-run says what it would write (exit 3).
//
// -prepare writes a walkthrough's disks: a volume with three leftover
// copies on two disks, in the engine's real format with sparse files
// (holding an ext4 filesystem when mkfs.ext4 is installed).
//
// Exit codes: 0 done, 1 failed, 2 bad usage, 3 dry run that would act (-dry-run),
// 4 refused by a safety rule.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caretaker-storage/caretaker/examples/internal/cli"
	"github.com/caretaker-storage/caretaker/salvage"
)

// Exit codes: the convention every caretaker tool follows.
const (
	exitOK      = cli.ExitOK
	exitFailed  = cli.ExitFailed
	exitUsage   = cli.ExitUsage
	exitDryRun  = cli.ExitDryRun
	exitRefused = cli.ExitRefused
)

var command = cli.Command{
	Refuses: true,
	Name:    "longhorn-salvage",
	Usage: "longhorn-salvage -disk PATH [-disk PATH ...] [-volume NAME] [-json]\n" +
		"       longhorn-salvage -export REPLICA_DIR -o FILE [-backing FILE] [-force] [-overwrite] [-no-checksum] [-dry-run]\n" +
		"       longhorn-salvage -prepare DIR",
	About: "longhorn-salvage lists the replica directories under <disk>/replicas of Longhorn v1 disks, says which copies " +
		"of each volume can be recovered and ranks them (1 = best), and exports a copy's data as a raw image, " +
		"printing its SHA-256. It never changes anything on the disks.",
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// paths is a repeatable string flag.
type paths []string

func (p *paths) String() string     { return strings.Join(*p, ",") }
func (p *paths) Set(v string) error { *p = append(*p, v); return nil }

// refusal is an error that exits 4.
type refusal struct{ error }

func refusef(format string, args ...any) error { return refusal{fmt.Errorf(format, args...)} }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := command.FlagSet()
	var disks paths
	fl.Var(&disks, "disk", "a disk's `path` (repeatable): list its replica directories; with -export, also a place the output must not be in")
	volume := fl.String("volume", "", "list only this volume's copies")
	asJSON := fl.Bool("json", false, "print the list as a JSON array")
	export := fl.String("export", "", "export the replica `directory`'s data as a raw image")
	out := fl.String("o", "", "the image `file` -export writes")
	force := fl.Bool("force", false, "export even a copy that is not recoverable (the image may be wrong)")
	overwrite := fl.Bool("overwrite", false, "replace an existing output file")
	dryRun := fl.Bool("dry-run", false, "with -export: inspect and say what would be written, write nothing")
	prepare := fl.String("prepare", "", "write a walkthrough's two disks into `DIR` (new or empty) and exit")
	noChecksum := fl.Bool("no-checksum", false, "with -export: do not compute the image's SHA-256 (the export then runs at the speed of the disks, not of hashing on one core)")
	backing := fl.String("backing", "", "with -export: the backing image `file` to use when the copy's own disk lacks it; checked against the backing.cfg beside it and the volume's size")
	err := command.Parse(fl, args, stdout, stderr)
	if err == nil {
		err = checkUsage(disks, *export, *out, *prepare, *volume, *asJSON, *force, *overwrite, *dryRun)
	}
	if err == nil && (*backing != "" || *noChecksum) && *export == "" {
		err = cli.Usagef("-backing and -no-checksum go with -export")
	}
	if err == nil {
		switch {
		case *prepare != "":
			err = prepareDemo(ctx, *prepare, stdout)
		case *export != "":
			var code int
			code, err = exportImage(ctx, *export, *out, disks, exportFlags{force: *force, overwrite: *overwrite, dryRun: *dryRun, noChecksum: *noChecksum, backing: *backing}, stdout, stderr)
			if err == nil {
				return code
			}
		default:
			err = list(ctx, disks, *volume, *asJSON, stdout, stderr)
		}
	}
	var r refusal
	if errors.As(err, &r) {
		fmt.Fprintf(stderr, "%s: refused: %v\n", command.Name, r.error)
		return exitRefused
	}
	return command.Exit(err, stderr)
}

func checkUsage(disks paths, export, out, prepare, volume string, asJSON, force, overwrite, dryRun bool) error {
	modes := 0
	for _, on := range []bool{prepare != "", export != "", len(disks) > 0 && export == ""} {
		if on {
			modes++
		}
	}
	switch {
	case modes == 0:
		return cli.Usagef("one of -disk, -export or -prepare is required")
	case modes > 1:
		return cli.Usagef("-prepare, -export and listing (-disk) are separate modes")
	case export != "" && out == "":
		return cli.Usagef("-export needs -o FILE")
	case export == "" && (out != "" || force || overwrite || dryRun):
		return cli.Usagef("-o, -force, -overwrite and -dry-run go with -export")
	case export != "" && (volume != "" || asJSON):
		return cli.Usagef("-volume and -json go with listing (-disk without -export)")
	case prepare != "" && (volume != "" || asJSON):
		return cli.Usagef("-volume and -json go with listing")
	}
	return nil
}

// backingEntry is a copy's backing image in the list.
type backingEntry struct {
	Recorded    string `json:"recorded"`
	Path        string `json:"path"`
	Present     bool   `json:"present"`
	Format      string `json:"format,omitempty"`
	Size        int64  `json:"size"`
	VirtualSize int64  `json:"virtualSize"`
}

// entry is one replica directory in the list; the JSON keys are the
// tool's contract.
type entry struct {
	Dir          string   `json:"dir"`
	Disk         string   `json:"disk"`
	Volume       string   `json:"volume"`
	Recoverable  bool     `json:"recoverable"`
	Rank         int      `json:"rank"`
	Basis        string   `json:"basis"`
	Reasons      []string `json:"reasons"`
	Notes        []string `json:"notes"`
	Revision     *int64   `json:"revision"`
	Size         int64    `json:"size"`
	Head         string   `json:"head"`
	Layers       int      `json:"layers"`
	Apparent     int64    `json:"apparentBytes"`
	Allocated    int64    `json:"allocatedBytes"`
	HeadModified string   `json:"headModified,omitempty"`
	Dirty        bool     `json:"dirty"`
	Rebuilding   bool     `json:"rebuilding"`
	Encrypted    bool     `json:"encrypted"`
	MetaFormat   string   `json:"metaFormat,omitempty"`
	// Backing is the backing image the copy's volume.meta names, as
	// found; absent when it names none.
	Backing *backingEntry `json:"backing,omitempty"`
}

func list(ctx context.Context, disks paths, volume string, asJSON bool, stdout, stderr io.Writer) error {
	var ins []*salvage.Inspection
	var diskOf []string
	for _, disk := range disks {
		dir := filepath.Join(disk, "replicas")
		if fi, err := os.Lstat(dir); err == nil && !fi.IsDir() {
			return refusef("%s is not a directory (%s): it is never followed", dir, fi.Mode().Type())
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("-disk %s: %w", disk, err)
		}
		for _, e := range ents {
			if !e.IsDir() {
				fmt.Fprintf(stderr, "skipped %s: not a directory (%s)\n", filepath.Join(dir, e.Name()), e.Type())
				continue
			}
			in, err := salvage.Inspect(ctx, filepath.Join(dir, e.Name()), salvage.Options{DiskPath: disk})
			if err != nil {
				if ctx.Err() != nil {
					return err
				}
				fmt.Fprintf(stderr, "skipped %s: %v\n", filepath.Join(dir, e.Name()), err)
				continue
			}
			if volume != "" && in.Volume != volume {
				continue // the volume as Inspect names it: the directory's name by Longhorn's rule
			}
			ins = append(ins, in)
			diskOf = append(diskOf, disk)
		}
	}
	ranks := salvage.Rank(ins)
	entries := make([]entry, len(ins))
	for i, in := range ins {
		e := entry{Dir: in.Dir, Disk: diskOf[i], Volume: in.Volume, Recoverable: in.Recoverable, Rank: ranks[i].Rank,
			Basis: string(ranks[i].Basis), Reasons: in.ReasonStrings(), Notes: in.Notes, Size: in.Meta.Size, Head: in.Meta.Head,
			Layers: len(in.Layers), Apparent: in.Apparent, Allocated: in.Allocated, Dirty: in.Meta.Dirty,
			Rebuilding: in.Meta.Rebuilding, Encrypted: in.Meta.Encrypted, MetaFormat: string(in.Meta.Format)}
		if e.Notes == nil {
			e.Notes = []string{}
		}
		if b := in.Backing; b != nil {
			e.Backing = &backingEntry{Recorded: b.Recorded, Path: b.Path, Present: b.Present, Format: b.Format, Size: b.Size, VirtualSize: b.VirtualSize}
		}
		if in.HasRevision {
			rev := in.Revision
			e.Revision = &rev
		}
		if !in.HeadModTime.IsZero() {
			e.HeadModified = in.HeadModTime.UTC().Format(time.RFC3339Nano)
		}
		entries[i] = e
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := strings.Compare(a.Volume, b.Volume); c != 0 {
			return c
		}
		if ra, rb := rankKey(a.Rank), rankKey(b.Rank); ra != rb {
			return ra - rb
		}
		return strings.Compare(a.Dir, b.Dir)
	})
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(entries)
	}
	printTable(stdout, entries)
	return nil
}

// rankKey puts unranked (0) after every rank.
func rankKey(r int) int {
	if r == 0 {
		return 1 << 30
	}
	return r
}

func printTable(w io.Writer, entries []entry) {
	if len(entries) == 0 {
		fmt.Fprintln(w, "no replica directories found")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VOLUME\tRANK\tRECOVERABLE\tREVISION\tSIZE\tALLOCATED\tHEAD MODIFIED\tDIR")
	for _, e := range entries {
		rank, rev, mod := "-", "-", "-"
		if e.Rank > 0 {
			rank = fmt.Sprint(e.Rank)
		}
		if e.Revision != nil {
			rev = fmt.Sprint(*e.Revision)
		}
		if e.HeadModified != "" {
			t, _ := time.Parse(time.RFC3339Nano, e.HeadModified)
			mod = t.Format("2006-01-02 15:04:05")
		}
		rec := "yes"
		if !e.Recoverable {
			rec = "no"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Volume, rank, rec, rev, human(e.Size), human(e.Allocated), mod, e.Dir)
	}
	tw.Flush()
	for _, e := range entries {
		if b := e.Backing; b != nil && b.Present {
			fmt.Fprintf(w, "  %s: backing image %s (%s, virtual size %s)\n", e.Dir, b.Path, b.Format, human(b.VirtualSize))
		}
		for _, r := range e.Reasons {
			fmt.Fprintf(w, "  %s: %s\n", e.Dir, r)
		}
	}
}

func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

type exportFlags struct {
	force, overwrite, dryRun, noChecksum bool
	backing                              string // -backing FILE
}

// exportImage exports one replica directory. It returns the exit code,
// or an error.
func exportImage(ctx context.Context, dir, out string, disks paths, fl exportFlags, stdout, stderr io.Writer) (int, error) {
	outAbs, err := filepath.Abs(out)
	if err != nil {
		return 0, err
	}
	// Where the output must not be: the replica's disk (or the directory
	// itself when it is not under <disk>/replicas) and every -disk.
	guarded := []string{dir}
	if parent := filepath.Dir(filepath.Clean(dir)); filepath.Base(parent) == "replicas" {
		guarded = append(guarded, filepath.Dir(parent))
	}
	guarded = append(guarded, disks...)
	outReal, err := realPath(outAbs)
	if err != nil {
		return 0, fmt.Errorf("-o %s: %w", out, err)
	}
	for _, g := range guarded {
		gReal, err := realPath(g)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", g, err)
		}
		if within(outReal, gReal) {
			return 0, refusef("-o %s is inside %s: the output is never written on the disk being salvaged", out, g)
		}
	}
	if fi, err := os.Lstat(outAbs); err == nil {
		if !fi.Mode().IsRegular() {
			return 0, refusef("-o %s exists and is not a regular file", out)
		}
		if !fl.overwrite {
			return 0, refusef("-o %s exists; add -overwrite to replace it", out)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}

	iopts := salvage.Options{BackingFile: fl.backing}
	if fl.backing != "" {
		if iopts.BackingFile, err = filepath.Abs(fl.backing); err != nil {
			return 0, err
		}
	}
	in, err := salvage.Inspect(ctx, dir, iopts)
	if err != nil {
		return 0, err
	}
	if fl.backing != "" && in.Backing == nil {
		return 0, cli.Usagef("-backing: %s records no backing image", dir)
	}
	for _, n := range in.Notes {
		fmt.Fprintf(stderr, "note: %s\n", n)
	}
	if b := in.Backing; b != nil && b.Present {
		fmt.Fprintf(stderr, "backing image: %s (%s, virtual size %s)\n", b.Path, b.Format, human(b.VirtualSize))
		for _, c := range b.Checked {
			fmt.Fprintf(stderr, "  checked: %s\n", c)
		}
	}
	if !in.Recoverable {
		for _, r := range in.ReasonStrings() {
			fmt.Fprintf(stderr, "not recoverable: %s\n", r)
		}
		if !fl.force {
			return 0, refusef("%s is not recoverable; nothing was written (add -force to export it anyway)", dir)
		}
		if !in.MetaRead || len(in.Layers) == 0 {
			return 0, refusef("%s has no readable volume.meta or head: there is nothing to export, even forced", dir)
		}
		fmt.Fprintln(stderr, "warning: exporting a copy that is not recoverable (-force): the image may be wrong")
	}
	if fl.dryRun {
		fmt.Fprintf(stdout, "dry run: would write %d bytes (%s, %d layers) of volume %s to %s\n", in.Meta.Size, human(in.Meta.Size), len(in.Layers), in.Volume, outAbs)
		return exitDryRun, nil
	}

	tmp, err := os.CreateTemp(filepath.Dir(outAbs), "."+filepath.Base(outAbs)+".partial-*")
	if err != nil {
		return 0, err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// The image is exactly the volume's size; what the export does not
	// write stays a hole.
	if err := tmp.Truncate(in.Meta.Size); err != nil {
		return 0, err
	}
	bar := newProgress(stderr)
	_, res, err := salvage.Recover(ctx, dir, tmp, salvage.RecoverOptions{Inspect: iopts, Force: fl.force, Progress: bar.update, NoChecksum: fl.noChecksum})
	bar.finish()
	if errors.Is(err, salvage.ErrNotRecoverable) {
		return 0, refusal{err}
	}
	if err != nil {
		return 0, err
	}
	if res.Size != in.Meta.Size {
		return 0, fmt.Errorf("the export wrote %d bytes, the volume has %d", res.Size, in.Meta.Size)
	}
	if err := tmp.Sync(); err != nil {
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if fl.overwrite {
		err = os.Rename(tmp.Name(), outAbs)
	} else if err = os.Link(tmp.Name(), outAbs); err == nil {
		// A link fails if the name appeared meanwhile: never clobbered.
		err = os.Remove(tmp.Name())
	} else if errors.Is(err, os.ErrExist) {
		return 0, refusef("-o %s appeared while exporting; add -overwrite to replace it", out)
	}
	if err != nil {
		return 0, err
	}
	done = true
	if fl.noChecksum {
		fmt.Fprintf(stdout, "%s (no checksum: -no-checksum)\n", outAbs)
	} else {
		fmt.Fprintf(stdout, "%s  %s\n", hex.EncodeToString(res.SHA256[:]), outAbs)
	}
	printNextSteps(stderr, outAbs, in.Meta.Size)
	return exitOK, nil
}

// printNextSteps says how the exported image goes back into Longhorn:
// copied into a new volume's block device, or uploaded as a backing image
// a new volume is created from.
func printNextSteps(w io.Writer, image string, size int64) {
	fmt.Fprintf(w, `next: check the image (its filesystem, read-only), then put it back into Longhorn in one of two ways:
  a) into a new volume: create a volume of at least %d bytes (%s), attach it to one node in maintenance mode
     (no workload uses it), and on that node copy the image onto its block device:
       dd if=%s of=/dev/longhorn/NEW-VOLUME bs=4M conv=sparse,fsync status=progress
     then detach it and use it as any volume;
  b) as a backing image: create a backing image from the file (Longhorn UI: Backing Image, Create, source
     "Upload", or a BackingImage with sourceType "download" from a URL that serves it), then create a
     volume of at least %d bytes with that backing image.
`, size, human(size), image, size)
}

// realPath resolves every symbolic link of p; for a path that does not
// exist yet, its existing parent's.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, os.ErrNotExist) {
		parent, perr := filepath.EvalSymlinks(filepath.Dir(abs))
		if perr != nil {
			return "", perr
		}
		return filepath.Join(parent, filepath.Base(abs)), nil
	}
	return real, err
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// progress draws a bar on a terminal, nothing otherwise.
type progress struct {
	w    io.Writer
	on   bool
	last int
}

func newProgress(w io.Writer) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, on: ok && isTerminal(f), last: -1}
}

func (p *progress) update(done, total int64) {
	if !p.on || total <= 0 {
		return
	}
	pct := int(done * 100 / total)
	if pct == p.last {
		return
	}
	p.last = pct
	const width = 40
	fill := pct * width / 100
	fmt.Fprintf(p.w, "\r[%s%s] %3d%% %s / %s", strings.Repeat("#", fill), strings.Repeat(" ", width-fill), pct, human(done), human(total))
}

func (p *progress) finish() {
	if p.on && p.last >= 0 {
		fmt.Fprintln(p.w)
	}
}
