package walkthroughs

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// readmes are the walkthroughs held to the tools, relative to the
// repository's root, with the commands each needs besides the tools (a
// machine without them skips that README, saying so).
var readmes = []struct {
	path  string
	needs []string
}{
	{"examples/longhorn-salvage/README.md", []string{"jq", "mkfs.ext4", "fsck.ext4", "debugfs", "sha256sum"}},
	{"examples/backup-delete/README.md", nil},
	{"examples/spdk-inventory/README.md", []string{"tail", "wc"}},
}

// step is one command of a walkthrough and what the README shows it
// printing.
type step struct {
	cmd  string
	want []string
}

// block is one walkthrough block of a README.
type block struct {
	line       int // where it starts, for messages
	compare    bool
	background bool
	steps      []step
}

// The markers a README may put (as an HTML comment, which readers do not
// see) on the line before a block: skip it (it needs a server in another
// terminal, or a real node), or run it without comparing its output
// (what it prints depends on the machine).
//
// A block marked background holds servers the walkthrough talks to ("in
// one terminal"): each command is started and left running until the
// walkthrough ends, and the next block waits until it printed a line
// with "ready".
const (
	markSkip       = "<!-- walkthrough: skip -->"
	markRun        = "<!-- walkthrough: run, output varies -->"
	markBackground = "<!-- walkthrough: background -->"
)

// parseBlocks returns the walkthrough blocks of a README.
func parseBlocks(text string) []block {
	var out []block
	sc := bufio.NewScanner(strings.NewReader(text))
	n, prev := 0, ""
	var cur *block
	var pending []string // a command's lines, continued with a backslash
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur == nil && (line == "```" || (prev == markBackground && strings.HasPrefix(line, "```"))):
			cur = &block{line: n, compare: prev != markRun && prev != markBackground, background: prev == markBackground}
			if prev == markSkip {
				cur = &block{line: -1}
			}
		case cur != nil && line == "```":
			if cur.line > 0 && len(cur.steps) > 0 {
				out = append(out, *cur)
			}
			cur = nil
		case cur != nil && cur.line > 0:
			switch {
			case len(pending) > 0:
				pending = append(pending, strings.TrimSpace(strings.TrimSuffix(line, `\`)))
				if !strings.HasSuffix(line, `\`) {
					cur.steps = append(cur.steps, step{cmd: strings.Join(pending, " ")})
					pending = nil
				}
			case strings.HasPrefix(line, "$ "):
				c := strings.TrimPrefix(line, "$ ")
				if strings.HasSuffix(c, `\`) {
					pending = []string{strings.TrimSpace(strings.TrimSuffix(c, `\`))}
					continue
				}
				cur.steps = append(cur.steps, step{cmd: c})
			case len(cur.steps) == 0:
				cur.line = -1 // not a walkthrough: its first line is no command
			default:
				s := &cur.steps[len(cur.steps)-1]
				s.want = append(s.want, line)
			}
		}
		if strings.TrimSpace(line) != "" {
			prev = strings.TrimSpace(line)
		}
	}
	return out
}

var (
	goBuild = regexp.MustCompile(`^go build -o (\S+) \./examples/([a-z-]+)$`)
	goRun   = regexp.MustCompile(`go run \./examples/([a-z-]+)`)
)

// script turns a README's blocks, in order, into one testscript (each
// block goes on from where the one before left): /tmp becomes the work
// directory's tmp, ./examples/ builds from the checkout, and each
// command's combined output is compared with the README's.
func script(blocks []block) string {
	var s, files strings.Builder
	s.WriteString("mkdir tmp\n")
	i := 0
	for _, b := range blocks {
		fmt.Fprintf(&s, "# README line %d\n", b.line)
		for _, st := range b.steps {
			i++
			writeStep(&s, &files, b, st, i)
		}
	}
	return s.String() + files.String()
}

// writeStep writes the commands of step st, the i-th, and the file of
// its expected output.
func writeStep(s, files *strings.Builder, b block, st step, i int) {
	{
		cmd := strings.ReplaceAll(st.cmd, "/tmp/", "$WORK/tmp/")
		cmd = strings.ReplaceAll(cmd, " examples/", " $REPO/examples/") // files the repository ships
		if m := goBuild.FindStringSubmatch(cmd); m != nil {
			cmd = fmt.Sprintf("cd $REPO && go build -o $WORK/%s ./examples/%s", m[1], m[2])
		}
		cmd = goRun.ReplaceAllString(cmd, "$$WORK/.bin/$1")
		for _, m := range goRun.FindAllStringSubmatch(st.cmd, -1) {
			fmt.Fprintf(s, "exec sh -c 'cd $REPO && go build -o $WORK/.bin/%s ./examples/%s'\n", m[1], m[1])
		}
		if b.background {
			fmt.Fprintf(s, "start-ready %s\n", shQuote(cmd))
			return
		}
		fmt.Fprintf(s, "exec sh -c %s\n", shQuote("{ "+cmd+"; } 2>&1"))
		if b.compare {
			fmt.Fprintf(s, "readme-output want%d\n", i)
			fmt.Fprintf(files, "-- want%d --\n%s", i, strings.Join(st.want, "\n"))
			if len(st.want) > 0 {
				files.WriteString("\n")
			}
		}
	}
}

// shQuote quotes s for testscript's own parser, which takes '...' with ”
// for a quote inside.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// What varies from run to run, masked on both sides.
var masks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\b[0-9a-f]{64}\b`), "<sha256>"},
	{regexp.MustCompile(`\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?Z?`), "<time>"},
	{regexp.MustCompile(`\b\d{2}:\d{2}:\d{2}\b`), "<time>"},
	{regexp.MustCompile(`(/tmp/[a-z0-9-]+)\.[A-Za-z0-9]{6,}`), "$1.<random>"},
	{regexp.MustCompile(`[ \t]+`), " "},
}

func mask(s string) string {
	for _, m := range masks {
		s = m.re.ReplaceAllString(s, m.with)
	}
	return strings.TrimRight(s, " ")
}

// readmeOutput compares the last command's output with the README's,
// line by line, masked.
func readmeOutput(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: readme-output WANTFILE")
	}
	got := strings.ReplaceAll(ts.ReadFile("stdout"), ts.Getenv("WORK")+"/tmp/", "/tmp/")
	want := ts.ReadFile(args[0])
	gl, wl := strings.Split(strings.TrimRight(got, "\n"), "\n"), strings.Split(strings.TrimRight(want, "\n"), "\n")
	if strings.TrimSpace(want) == "" {
		wl = nil
	}
	if strings.TrimSpace(got) == "" {
		gl = nil
	}
	for i := 0; i < max(len(gl), len(wl)); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if mask(g) != mask(w) {
			ts.Fatalf("line %d differs from the README:\n  README: %s\n  tool:   %s\nthe tool printed:\n%s", i+1, w, g, got)
		}
	}
}

// startReady starts a server command under sh, waits until it printed a
// line with "ready" (at most a minute), and stops it when the script
// ends.
func startReady(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: start-ready COMMAND")
	}
	cmd := exec.Command("sh", "-c", "exec "+args[0])
	cmd.Dir = ts.Getenv("WORK")
	for _, k := range []string{"PATH", "HOME", "WORK", "REPO", "TMPDIR"} {
		cmd.Env = append(cmd.Env, k+"="+ts.Getenv(k))
	}
	out, err := cmd.StdoutPipe()
	ts.Check(err)
	cmd.Stderr = cmd.Stdout
	ts.Check(cmd.Start())
	ts.Defer(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "ready") {
				said = true
				ready <- true
			}
		}
		if !said {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			ts.Fatalf("%s ended without saying it is ready", args[0])
		}
	case <-time.After(time.Minute):
		ts.Fatalf("%s did not say it is ready within a minute", args[0])
	}
}

// TestWalkthroughs runs every walkthrough block of the READMEs.
func TestWalkthroughs(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range readmes {
		readme := r.path
		text, err := os.ReadFile(filepath.Join(repo, readme))
		if err != nil {
			t.Fatal(err)
		}
		blocks := parseBlocks(string(text))
		if len(blocks) == 0 {
			t.Errorf("%s has no walkthrough block", readme)
		}
		dir := t.TempDir()
		name := strings.ReplaceAll(filepath.Dir(readme), "/", "-") + ".txtar"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script(blocks)), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Run(readme, func(t *testing.T) {
			for _, c := range r.needs {
				if _, err := exec.LookPath(c); err != nil {
					t.Skipf("%s needs %s, which this machine lacks (Debian: jq, e2fsprogs, coreutils)", readme, c)
				}
			}
			testscript.Run(t, testscript.Params{
				Dir: dir,
				Setup: func(e *testscript.Env) error {
					e.Setenv("REPO", repo)
					for _, k := range []string{"HOME", "GOPATH", "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN"} {
						if v := os.Getenv(k); v != "" {
							e.Setenv(k, v)
						}
					}
					return nil
				},
				Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){"readme-output": readmeOutput, "start-ready": startReady},
			})
		})
	}
}
