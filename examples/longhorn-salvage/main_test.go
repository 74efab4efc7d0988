package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/caretaker-storage/caretaker/examples/internal/cli/clitest"
	"github.com/caretaker-storage/caretaker/salvage/salvagetest"
)

// state records every entry under root (salvagetest.TreeState).
func state(t *testing.T, root string) map[string]string {
	t.Helper()
	st, err := salvagetest.TreeState(root)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func sameState(a, b map[string]string) bool { return maps.Equal(a, b) }

// listed is what the JSON contract promises per directory.
type listed struct {
	Dir         string   `json:"dir"`
	Volume      string   `json:"volume"`
	Recoverable bool     `json:"recoverable"`
	Rank        int      `json:"rank"`
	Reasons     []string `json:"reasons"`
}

func TestCommandLine(t *testing.T) {
	base := t.TempDir()
	demo := filepath.Join(base, "demo")
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-prepare", demo}, &out, &out); code != 0 {
		t.Fatalf("-prepare exited %d: %s", code, out.String())
	}
	diskA, diskB := filepath.Join(demo, "disk-a"), filepath.Join(demo, "disk-b")
	newest := filepath.Join(diskA, "replicas", "pvc-demo-1a2b3c4d")
	stale := filepath.Join(diskB, "replicas", "pvc-demo-5e6f7a8b")
	rebuilding := filepath.Join(diskB, "replicas", "pvc-demo-9c0d1e2f")
	// Things the listing must cope with: a damaged copy of another
	// volume, a symbolic link and a FIFO in replicas/.
	other := filepath.Join(diskA, "replicas", "pvc-other-0f0e0d0c")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(newest, filepath.Join(diskA, "replicas", "pvc-demo-77777777")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(diskB, "replicas", "pvc-demo-88888888"), 0o600); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(base, "existing.img")
	if err := os.WriteFile(existing, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(base, "linked"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(diskA, "replicas"), filepath.Join(base, "linked", "replicas")); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(base, "pvc-demo.img")
	before := map[string]map[string]string{diskA: state(t, diskA), diskB: state(t, diskB)}

	decode := func(t *testing.T, stdout string) []listed {
		t.Helper()
		var got []listed
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("not a JSON array: %v\n%s", err, stdout)
		}
		return got
	}
	noFile := func(p string) func(t *testing.T, _, _ string) {
		return func(t *testing.T, _, _ string) {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s was written", p)
			}
			if m, _ := filepath.Glob(filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".partial-*")); len(m) > 0 {
				t.Errorf("partial files left: %v", m)
			}
		}
	}
	cases := []clitest.Case{
		{Name: "no mode", Args: nil, Code: exitUsage, Stderr: []string{"one of -disk, -export or -prepare"}},
		{Name: "two modes", Args: []string{"-prepare", base, "-export", newest, "-o", img}, Code: exitUsage},
		{Name: "export without -o", Args: []string{"-export", newest}, Code: exitUsage, Stderr: []string{"-o FILE"}},
		{Name: "-force without -export", Args: []string{"-disk", diskA, "-force"}, Code: exitUsage},
		{Name: "stray argument", Args: []string{"-disk", diskA, "extra"}, Code: exitUsage},
		{Name: "missing disk", Args: []string{"-disk", filepath.Join(base, "nope")}, Code: exitFailed},
		{Name: "json", Args: []string{"-json", "-disk", diskA, "-disk", diskB}, Code: exitOK,
			Stderr: []string{"skipped " + filepath.Join(diskA, "replicas", "pvc-demo-77777777"), "skipped " + filepath.Join(diskB, "replicas", "pvc-demo-88888888")},
			Check: func(t *testing.T, stdout, _ string) {
				got := decode(t, stdout)
				want := map[string]listed{
					newest:     {Volume: "pvc-demo", Recoverable: true, Rank: 1},
					stale:      {Volume: "pvc-demo", Recoverable: true, Rank: 2},
					rebuilding: {Volume: "pvc-demo", Recoverable: false, Rank: 0},
					other:      {Volume: "pvc-other", Recoverable: false, Rank: 0},
				}
				if len(got) != len(want) {
					t.Fatalf("%d entries, want %d: %+v", len(got), len(want), got)
				}
				for _, g := range got {
					w, ok := want[g.Dir]
					if !ok || g.Volume != w.Volume || g.Recoverable != w.Recoverable || g.Rank != w.Rank {
						t.Errorf("%+v, want %+v", g, w)
					}
					if g.Reasons == nil || g.Recoverable == (len(g.Reasons) > 0) {
						t.Errorf("%s: recoverable %v with reasons %q", g.Dir, g.Recoverable, g.Reasons)
					}
				}
			}},
		{Name: "json one volume", Args: []string{"-json", "-volume", "pvc-other", "-disk", diskA, "-disk", diskB}, Code: exitOK,
			Check: func(t *testing.T, stdout, _ string) {
				if got := decode(t, stdout); len(got) != 1 || got[0].Dir != other || !strings.Contains(strings.Join(got[0].Reasons, ""), "volume-meta") {
					t.Errorf("%+v", got)
				}
			}},
		{Name: "json nothing", Args: []string{"-json", "-volume", "pvc-none", "-disk", diskA}, Code: exitOK, Stdout: []string{"[]"}},
		{Name: "table", Args: []string{"-disk", diskA, "-disk", diskB}, Code: exitOK,
			Stdout: []string{"VOLUME", "RANK", newest, rebuilding + ": rebuilding"},
			Check: func(t *testing.T, stdout, _ string) {
				for _, line := range strings.Split(stdout, "\n") {
					if f := strings.Fields(line); len(f) > 3 && f[len(f)-1] == newest && (f[1] != "1" || f[2] != "yes") {
						t.Errorf("the newest copy's line: %q", line)
					}
				}
			}},
		{Name: "export unrecoverable", Args: []string{"-export", rebuilding, "-o", img}, Code: exitRefused,
			Stderr: []string{"not recoverable: rebuilding", "-force"}, Check: noFile(img)},
		{Name: "export a link to a replica", Args: []string{"-export", filepath.Join(diskA, "replicas", "pvc-demo-77777777"), "-o", img}, Code: exitRefused,
			Stderr: []string{"not-a-directory"}, Check: noFile(img)},
		{Name: "export inside the disk", Args: []string{"-export", newest, "-o", filepath.Join(diskA, "out.img")}, Code: exitRefused,
			Stderr: []string{"inside"}, Check: noFile(filepath.Join(diskA, "out.img"))},
		{Name: "export inside another disk", Args: []string{"-export", newest, "-disk", diskB, "-o", filepath.Join(diskB, "out.img")}, Code: exitRefused,
			Check: noFile(filepath.Join(diskB, "out.img"))},
		{Name: "export over a file", Args: []string{"-export", newest, "-o", existing}, Code: exitRefused, Stderr: []string{"-overwrite"},
			Check: func(t *testing.T, _, _ string) {
				if b, _ := os.ReadFile(existing); string(b) != "keep me" {
					t.Errorf("overwritten: %q", b)
				}
			}},
		{Name: "export dry run", Args: []string{"-export", newest, "-o", img, "-dry-run"}, Code: exitDryRun,
			Stdout: []string{"would write 67108864 bytes"}, Check: noFile(img)},
		{Name: "replicas is a link", Args: []string{"-disk", filepath.Join(base, "linked")}, Code: exitRefused, Stderr: []string{"never followed"}},
		{Name: "prepare into a non-empty dir", Args: []string{"-prepare", demo}, Code: exitFailed, Stderr: []string{"not empty"}},
	}
	clitest.Run(t, func(args []string, stdout, stderr *bytes.Buffer) int {
		return run(context.Background(), args, stdout, stderr)
	}, cases)

	for d, b := range before {
		if !sameState(b, state(t, d)) {
			t.Errorf("the tool changed %s", d)
		}
	}
}

// TestExportWritesTheImage exports the best copy and compares it with
// the naive image of the walkthrough's layers.
func TestExportWritesTheImage(t *testing.T) {
	base := t.TempDir()
	demo := filepath.Join(base, "demo")
	var out, errOut bytes.Buffer
	copies, withFS, err := writeDemo(context.Background(), demo)
	if err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(demo, "disk-a")
	before := state(t, disk)
	img := filepath.Join(base, "pvc-demo.img")
	out.Reset()
	code := run(context.Background(), []string{"-export", filepath.Join(disk, "replicas", "pvc-demo-1a2b3c4d"), "-o", img}, &out, &errOut)
	if code != 0 {
		t.Fatalf("export exited %d: %s", code, errOut.String())
	}
	if strings.ContainsAny(errOut.String(), "\r#") {
		t.Errorf("a progress bar on a non-terminal: %q", errOut.String())
	}
	// The next step, in Longhorn's terms, names the image and the size a
	// new volume needs.
	if e := errOut.String(); !strings.Contains(e, "next: ") || !strings.Contains(e, "dd if="+img+" of=/dev/longhorn/NEW-VOLUME") ||
		!strings.Contains(e, fmt.Sprintf("at least %d bytes", len(copies[0].replica.Image()))) || !strings.Contains(e, "backing image") {
		t.Errorf("no next step after the export:\n%s", e)
	}
	data, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	want := copies[0].replica.Image()
	if !bytes.Equal(data, want) {
		t.Fatalf("the image differs from the layers' (%d bytes, want %d)", len(data), len(want))
	}
	sum := sha256.Sum256(want)
	if line := strings.TrimSpace(out.String()); line != hex.EncodeToString(sum[:])+"  "+img {
		t.Errorf("printed %q", line)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(img, &st); err != nil || st.Blocks*512 >= int64(len(want))/2 {
		t.Errorf("the image is not sparse: %d blocks, %v", st.Blocks, err)
	}
	if !sameState(before, state(t, disk)) {
		t.Error("the export changed the disk")
	}
	if !bytes.HasPrefix(data, []byte("LONGHORN SALVAGE DEMO: newest copy")) {
		t.Errorf("the image starts with %q", data[:64])
	}
	if fsck, err := exec.LookPath("fsck.ext4"); err == nil && withFS {
		if out, err := exec.Command(fsck, "-n", "-f", img).CombinedOutput(); err != nil {
			t.Errorf("fsck.ext4 -n: %v\n%s", err, out)
		}
	}
	// Again without -overwrite: refused, the image kept.
	if code := run(context.Background(), []string{"-export", filepath.Join(disk, "replicas", "pvc-demo-1a2b3c4d"), "-o", img}, &out, &errOut); code != exitRefused {
		t.Errorf("second export exited %d", code)
	}
	if code := run(context.Background(), []string{"-export", filepath.Join(disk, "replicas", "pvc-demo-1a2b3c4d"), "-o", img, "-overwrite"}, &out, &errOut); code != exitOK {
		t.Errorf("-overwrite exited %d: %s", code, errOut.String())
	}
	// The interrupted rebuild, forced: written, with a warning.
	forced := filepath.Join(base, "forced.img")
	errOut.Reset()
	if code := run(context.Background(), []string{"-export", filepath.Join(demo, "disk-b", "replicas", "pvc-demo-9c0d1e2f"), "-o", forced, "-force"}, &out, &errOut); code != exitOK || !strings.Contains(errOut.String(), "warning") {
		t.Fatalf("forced export exited %d: %s", code, errOut.String())
	}
	if data, err := os.ReadFile(forced); err != nil || !bytes.Equal(data, copies[2].replica.Image()) {
		t.Errorf("the forced image differs from its layers' (%v)", err)
	}
}

// TestExportWithoutChecksum: -no-checksum writes the same image and
// prints its path without a checksum; it goes with -export only.
func TestExportWithoutChecksum(t *testing.T) {
	base := t.TempDir()
	demo := filepath.Join(base, "demo")
	copies, _, err := writeDemo(context.Background(), demo)
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(base, "fast.img")
	var out, errOut bytes.Buffer
	dir := filepath.Join(demo, "disk-a", "replicas", "pvc-demo-1a2b3c4d")
	if code := run(context.Background(), []string{"-export", dir, "-o", img, "-no-checksum"}, &out, &errOut); code != exitOK {
		t.Fatalf("export exited %d: %s", code, errOut.String())
	}
	if line := strings.TrimSpace(out.String()); line != img+" (no checksum: -no-checksum)" {
		t.Errorf("printed %q", line)
	}
	if data, err := os.ReadFile(img); err != nil || !bytes.Equal(data, copies[0].replica.Image()) {
		t.Errorf("the image differs from the layers' (%v)", err)
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"-disk", filepath.Join(demo, "disk-a"), "-no-checksum"}, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), "-no-checksum go with -export") {
		t.Errorf("-no-checksum without -export exited %d: %s", code, errOut.String())
	}
}

// TestExportWithGivenBackingImage: a copy whose backing image is gone from
// its disk is refused; with -backing naming the image found elsewhere it
// is exported, and the tool says which file it used and what it checked.
// -json names the backing image of each copy.
func TestExportWithGivenBackingImage(t *testing.T) {
	base := t.TempDir()
	disk := filepath.Join(base, "disk")
	dir := filepath.Join(disk, "replicas", "pvc-b-0a1b2c3d")
	if err := os.MkdirAll(filepath.Join(disk, "replicas"), 0o700); err != nil {
		t.Fatal(err)
	}
	r := salvagetest.Replica{Size: 1 << 20, Head: salvagetest.Layer{Writes: []salvagetest.Write{salvagetest.Block(0, 'h')}},
		BackingFilePath: "/host/var/lib/longhorn/backing-images/img-0a1b2c3d/backing"}
	if err := salvagetest.WriteReplica(dir, r); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(base, "other")
	if _, err := salvagetest.WriteBackingImage(other, "img-0a1b2c3d", 1<<19, []salvagetest.Write{{Off: 4096, Data: bytes.Repeat([]byte{'K'}, 4096)}}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(other, "backing-images", "img-0a1b2c3d", "backing")
	img := filepath.Join(base, "out.img")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-export", dir, "-o", img}, &out, &errOut); code != exitRefused ||
		!strings.Contains(errOut.String(), "missing-backing-image") {
		t.Fatalf("without -backing: exit %d\n%s", code, errOut.String())
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"-export", dir, "-o", img, "-backing", file}, &out, &errOut); code != exitOK {
		t.Fatalf("with -backing: exit %d\n%s", code, errOut.String())
	}
	if e := errOut.String(); !strings.Contains(e, "backing image: "+file+" (raw, virtual size 512.0 KiB)") || !strings.Contains(e, "checked: ") {
		t.Errorf("the tool does not say which backing image it used:\n%s", e)
	}
	data, err := os.ReadFile(img)
	if err != nil || len(data) != 1<<20 || data[0] != 'h' || data[4096] != 'K' || data[8192] != 0 {
		t.Fatalf("export over the given backing image: %d bytes, %v", len(data), err)
	}
	// -backing on a copy that records no backing image is bad usage.
	plain := filepath.Join(disk, "replicas", "pvc-c-0a1b2c3d")
	if err := salvagetest.WriteReplica(plain, salvagetest.Replica{Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if code := run(context.Background(), []string{"-export", plain, "-o", filepath.Join(base, "c.img"), "-backing", file}, &out, &errOut); code != exitUsage {
		t.Errorf("-backing on a copy without a backing image: exit %d", code)
	}
	if code := run(context.Background(), []string{"-disk", disk, "-backing", file}, &out, &errOut); code != exitUsage {
		t.Errorf("-backing with listing: exit %d", code)
	}
	out.Reset()
	if code := run(context.Background(), []string{"-json", "-disk", disk}, &out, &errOut); code != exitOK {
		t.Fatalf("-json: exit %d", code)
	}
	var entries []struct {
		Dir     string `json:"dir"`
		Backing *struct {
			Recorded string `json:"recorded"`
			Present  bool   `json:"present"`
		} `json:"backing"`
	}
	if err := json.Unmarshal(out.Bytes(), &entries); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if (e.Dir == dir) != (e.Backing != nil) || (e.Backing != nil && (e.Backing.Present || e.Backing.Recorded != r.BackingFilePath)) {
			t.Errorf("-json entry %s: backing %+v", e.Dir, e.Backing)
		}
	}
}
