package walkthroughs

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// needs names, for the READMEs whose walkthroughs use more than the
// tools, sh and coreutils, the commands they use (a machine without them
// skips that README, saying so). Every README of the repository is
// read: the root's and each examples/*/README.md.
var needs = map[string][]string{
	"examples/longhorn-salvage/README.md": {"jq", "mkfs.ext4", "fsck.ext4", "debugfs", "sha256sum"},
}

// readme is one README of the repository: its path relative to the
// repository's root, with slashes, and its text.
type readme struct {
	path, text string
}

// readReadmes returns the repository's root and its READMEs: the root's
// first, then examples/*/README.md in order.
func readReadmes(t *testing.T) (repo string, out []readme) {
	t.Helper()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	found, err := filepath.Glob(filepath.Join(repo, "examples", "*", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{filepath.Join(repo, "README.md")}, found...) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(repo, f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, readme{path: filepath.ToSlash(rel), text: string(text)})
	}
	return repo, out
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
	needs      string // a program the rest of the README needs ("versitygw")
	steps      []step
}

// The markers a README may put (as an HTML comment, which readers do not
// see) on the line before a block:
//
//   - "skip: REASON" leaves the block out; the reason says what it needs
//     (a real node, a cluster) and what runs it instead;
//   - "output varies" runs the block without comparing its output;
//   - "background" marks servers the walkthrough talks to ("in one
//     terminal"): each command is started and left running, and the next
//     block waits until it printed a line with "ready". A later
//     background block stops the servers started before it (Ctrl-C in
//     that terminal).
//   - "needs NAME" runs the block and the rest of the README only where
//     NAME is installed (versitygw: $VERSITYGW, which make walkthroughs
//     sets), and skips them, saying so, elsewhere.
//
// Several, but for skip, go in one comment separated by commas:
// <!-- walkthrough: background, needs versitygw -->.
const markPrefix, markSuffix = "<!-- walkthrough:", "-->"

// marker is what a marker comment says.
type marker struct {
	ok         bool // the line is a marker
	skip       bool
	reason     string // why skipped
	varies     bool
	background bool
	needs      string
	bad        string // a word no marker has
}

func parseMarker(line string) marker {
	if !strings.HasPrefix(line, markPrefix) || !strings.HasSuffix(line, markSuffix) {
		return marker{}
	}
	m := marker{ok: true}
	body := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, markPrefix), markSuffix))
	if rest, ok := strings.CutPrefix(body, "skip"); ok {
		m.skip = true
		m.reason = strings.TrimSpace(strings.TrimPrefix(rest, ":"))
		return m
	}
	for _, w := range strings.Split(body, ",") {
		w = strings.TrimSpace(w)
		switch {
		case w == "output varies":
			m.varies = true
		case w == "background":
			m.background = true
		case strings.HasPrefix(w, "needs "):
			m.needs = strings.TrimSpace(strings.TrimPrefix(w, "needs "))
		default:
			m.bad = w
		}
	}
	return m
}

// fence is one fenced block of a README, walkthrough or not.
type fence struct {
	line  int    // its opening line
	info  string // the language after the backticks
	mark  marker // the marker on the line before it, if any
	lines []string
	open  bool // never closed: the README's end came first
}

// fences returns every fenced block of a README.
func fences(text string) []fence {
	var out []fence
	sc := bufio.NewScanner(strings.NewReader(text))
	n, prev := 0, ""
	var cur *fence
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &fence{line: n, info: strings.TrimSpace(strings.TrimPrefix(line, "```")), mark: parseMarker(prev)}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
		if strings.TrimSpace(line) != "" {
			prev = strings.TrimSpace(line)
		}
	}
	if cur != nil {
		cur.open = true
		out = append(out, *cur)
	}
	return out
}

// walkthrough says whether a fenced block is a walkthrough: no language
// (or a background block of any), and a first line that is a command.
func (f fence) walkthrough() bool {
	return (f.info == "" || f.mark.background) && len(f.lines) > 0 && strings.HasPrefix(f.lines[0], "$ ")
}

// shell says whether a fenced block holds commands for a reader to run
// (a shell block, or a bare block that starts with one).
func (f fence) shell() bool {
	switch f.info {
	case "sh", "shell", "bash", "console":
		return true
	case "":
		if len(f.lines) == 0 {
			return false
		}
		first := strings.Fields(f.lines[0] + " x")[0]
		return first == "$" || first == "go" || first == "make" || first == "kubectl" || strings.HasPrefix(first, "./")
	}
	return false
}

// parseBlocks returns the walkthrough blocks of a README.
func parseBlocks(text string) []block {
	var out []block
	for _, f := range fences(text) {
		if f.mark.skip || f.open || !f.walkthrough() {
			continue
		}
		b := block{line: f.line, compare: !f.mark.varies, background: f.mark.background, needs: f.mark.needs}
		var pending []string // a command's lines, continued with a backslash
		for _, line := range f.lines {
			switch {
			case len(pending) > 0:
				pending = append(pending, strings.TrimSpace(strings.TrimSuffix(line, `\`)))
				if !strings.HasSuffix(line, `\`) {
					b.steps = append(b.steps, step{cmd: strings.Join(pending, " ")})
					pending = nil
				}
			case strings.HasPrefix(line, "$ "):
				c := strings.TrimPrefix(line, "$ ")
				if strings.HasSuffix(c, `\`) {
					pending = []string{strings.TrimSpace(strings.TrimSuffix(c, `\`))}
					continue
				}
				b.steps = append(b.steps, step{cmd: c})
			default:
				s := &b.steps[len(b.steps)-1]
				s.want = append(s.want, line)
			}
		}
		out = append(out, b)
	}
	return out
}

var (
	goBuild    = regexp.MustCompile(`^go build -o (\S+) \./examples/([a-z-]+)$`)
	goRun      = regexp.MustCompile(`go run \./examples/([a-z-]+)`)
	makeRun    = regexp.MustCompile(`^make ([a-z0-9-]+)$`)
	fixedPort  = regexp.MustCompile(`127\.0\.0\.1:([1-9][0-9]*)`)
	exitStatus = regexp.MustCompile(`^exit status [1-9][0-9]*$`)
)

// script turns a README's blocks, in order, into one testscript (each
// block goes on from where the one before left): /tmp becomes the work
// directory's tmp, ./examples/ builds from the checkout, a fixed
// loopback port becomes the free one ports gives for it (so that two
// runs on one machine never meet), and each command's combined output is
// compared with the README's.
func script(blocks []block, ports map[string]string) string {
	var s, files strings.Builder
	s.WriteString("mkdir tmp\n")
	if p, ok := ports["7070"]; ok {
		fmt.Fprintf(&s, "env S3_PORT=%s\n", p) // make s3-server's port
	}
	i := 0
	started := false
	for _, b := range blocks {
		fmt.Fprintf(&s, "# README line %d\n", b.line)
		if b.needs != "" {
			fmt.Fprintf(&s, "[!%s] skip 'README line %d and after need %s, which this machine lacks'\n", b.needs, b.line, b.needs)
		}
		if b.background && started {
			s.WriteString("stop-servers\n")
		}
		started = started || b.background
		for _, st := range b.steps {
			i++
			writeStep(&s, &files, b, st, i, ports)
		}
	}
	return s.String() + files.String()
}

// writeStep writes the commands of step st, the i-th, and the file of
// its expected output. The tools are built once, into $BIN, for every
// README: go build -o copies one, go run runs one through gorun.
func writeStep(s, files *strings.Builder, b block, st step, i int, ports map[string]string) {
	cmd := strings.ReplaceAll(st.cmd, "/tmp/", "$WORK/tmp/")
	cmd = strings.ReplaceAll(cmd, " examples/", " $REPO/examples/") // files the repository ships
	cmd = fixedPort.ReplaceAllStringFunc(cmd, func(m string) string { return "127.0.0.1:" + ports[strings.TrimPrefix(m, "127.0.0.1:")] })
	if m := goBuild.FindStringSubmatch(cmd); m != nil {
		cmd = fmt.Sprintf("cp $BIN/%s $WORK/%s", m[2], m[1]) // built once, for every README
	}
	if m := makeRun.FindStringSubmatch(cmd); m != nil {
		cmd = "make --no-print-directory -C $REPO " + m[1]
	}
	cmd = goRun.ReplaceAllString(cmd, "$$BIN/gorun $1")
	if vars, ok := strings.CutPrefix(cmd, "export "); ok {
		// Each command runs in a shell of its own: the script keeps the
		// variables instead.
		for _, kv := range strings.Fields(vars) {
			fmt.Fprintf(s, "env %s\n", shQuote(kv))
		}
		return
	}
	if b.background {
		fmt.Fprintf(s, "start-ready %s", shQuote(cmd))
		if b.compare {
			// What the server printed until it said it is ready.
			fmt.Fprintf(s, " want%d", i)
			wantFile(files, i, st.want)
		}
		s.WriteString("\n")
		return
	}
	// A go run whose program failed prints "exit status N" last and
	// fails itself: the README shows it, and the script expects it.
	neg := ""
	if n := len(st.want); n > 0 && exitStatus.MatchString(st.want[n-1]) && !strings.Contains(cmd, "|") {
		neg = "! "
	}
	fmt.Fprintf(s, "%sexec sh -c %s\n", neg, shQuote("{ "+cmd+"; } 2>&1"))
	if b.compare {
		fmt.Fprintf(s, "readme-output want%d\n", i)
		wantFile(files, i, st.want)
	}
}

// wantFile writes the script's file want<i>: the lines the README shows
// the i-th command printing.
func wantFile(files *strings.Builder, i int, want []string) {
	fmt.Fprintf(files, "-- want%d --\n%s", i, strings.Join(want, "\n"))
	if len(want) > 0 {
		files.WriteString("\n")
	}
}

// freePorts gives each fixed loopback port a README names a free one of
// this machine.
func freePorts(t *testing.T, text string) map[string]string {
	ports := map[string]string{}
	for _, m := range fixedPort.FindAllStringSubmatch(text, -1) {
		if _, ok := ports[m[1]]; ok {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, p, _ := net.SplitHostPort(l.Addr().String())
		_ = l.Close()
		ports[m[1]] = p
	}
	return ports
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
	{regexp.MustCompile(`127\.0\.0\.1:[0-9]+`), "127.0.0.1:<port>"},
	{regexp.MustCompile(`\bfilesystem [0-9a-f]{16}\b`), "filesystem <fsid>"},
	{regexp.MustCompile(`[ \t]+`), " "},
}

func mask(s string) string {
	for _, m := range masks {
		s = m.re.ReplaceAllString(s, m.with)
	}
	return strings.TrimRight(s, " ")
}

// readmeOutput compares the last command's output with the README's.
func readmeOutput(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: readme-output WANTFILE")
	}
	compareOutput(ts, ts.ReadFile("stdout"), ts.ReadFile(args[0]))
}

// compareOutput compares what a command printed with what the README
// shows, line by line, masked. A README line "..." stands for any number
// of lines, and a line ending in " ..." for any line that starts as it
// does: the README left them out.
func compareOutput(ts *testscript.TestScript, got, want string) {
	got = strings.ReplaceAll(got, ts.Getenv("WORK")+"/tmp/", "/tmp/")
	gl, wl := lines(got), lines(want)
	if slices.ContainsFunc(wl, func(w string) bool { return strings.HasSuffix(w, "...") }) {
		if !matchLines(gl, wl) {
			ts.Fatalf("the output differs from the README's (where the README's \"...\" stands for lines left out):\nREADME:\n%s\nthe tool printed:\n%s", want, got)
		}
		return
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

// lines splits a command's output into lines; none when it is blank.
func lines(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return strings.Split(strings.TrimRight(s, "\n"), "\n")
}

// matchLines says whether got matches want, where a want line "..."
// matches any run of lines and one ending in " ..." any line with its
// beginning.
func matchLines(got, want []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for k := 0; k <= len(got); k++ {
			if matchLines(got[k:], want[1:]) {
				return true
			}
		}
		return false
	}
	if len(got) == 0 {
		return false
	}
	g, w := mask(got[0]), mask(want[0])
	if g != w && !(strings.HasSuffix(w, " ...") && strings.HasPrefix(g, strings.TrimSuffix(w, "..."))) {
		return false
	}
	return matchLines(got[1:], want[1:])
}

// servers are the background servers one script started, stopped by
// stop-servers and when the script ends.
type servers struct {
	mu    sync.Mutex
	procs []*exec.Cmd
}

// stop stops each server with SIGINT (Ctrl-C in its terminal), its whole
// process group, and kills what still runs after five seconds.
func (s *servers) stop() {
	s.mu.Lock()
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for _, c := range procs {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
}

// passEnv are the variables a background server gets from the script.
var passEnv = []string{"PATH", "HOME", "WORK", "REPO", "BIN", "TMPDIR", "S3_PORT", "VERSITYGW",
	"GOPATH", "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN", "XDG_CACHE_HOME"}

// startReady starts a server command under sh, in a process group of its
// own, waits until it printed a line with "ready" (at most two minutes:
// make s3-server may build), and leaves it running until stop-servers or
// the end of the script.
func startReady(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: start-ready COMMAND [WANTFILE]")
	}
	cmd := exec.Command("sh", "-c", "exec "+args[0])
	cmd.Dir = ts.Getenv("WORK")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for _, k := range passEnv {
		if v := ts.Getenv(k); v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	out, err := cmd.StdoutPipe()
	ts.Check(err)
	cmd.Stderr = cmd.Stdout
	ts.Check(cmd.Start())
	srv := ts.Value(serversKey{}).(*servers)
	srv.mu.Lock()
	srv.procs = append(srv.procs, cmd)
	srv.mu.Unlock()
	ready := make(chan bool, 1)
	var said strings.Builder
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if ok {
				continue // read on, so that the server never blocks on its output
			}
			mu.Lock()
			said.WriteString(sc.Text() + "\n") // up to the ready line, compared
			mu.Unlock()
			if strings.Contains(sc.Text(), "ready") {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		mu.Lock()
		printed := said.String()
		mu.Unlock()
		if !ok {
			ts.Fatalf("%s ended without saying it is ready:\n%s", args[0], printed)
		}
		if len(args) == 2 {
			compareOutput(ts, printed, ts.ReadFile(args[1]))
		}
	case <-time.After(2 * time.Minute):
		ts.Fatalf("%s did not say it is ready within two minutes", args[0])
	}
}

// stopServers stops the background servers started so far.
func stopServers(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: stop-servers")
	}
	ts.Value(serversKey{}).(*servers).stop()
}

type serversKey struct{}

// buildTools builds every tool under examples/ once, as go build would
// for a reader (the same check as make build-examples), into a directory
// of its own with gorun beside them, and returns that directory.
func buildTools(t *testing.T, repo string) string {
	bin := t.TempDir()
	cmd := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./examples/...")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/...: %v\n%s", err, out)
	}
	// go run reports a program's non-zero status as "exit status N" on
	// stderr and exits 1: gorun does the same with a tool built once.
	if err := os.WriteFile(filepath.Join(bin, "gorun"), []byte(gorun), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// gorun runs a tool built from ./examples as go run would: a non-zero
// status is printed as "exit status N" and becomes 1.
const gorun = `#!/bin/sh
tool=$1
shift
"$BIN/$tool" "$@"
s=$?
if [ $s -ne 0 ]; then
	echo "exit status $s" >&2
	exit 1
fi
`

// haveVersitygw says whether the S3 server the tests use is installed:
// make walkthroughs passes it in $VERSITYGW.
func haveVersitygw() bool {
	fi, err := os.Stat(os.Getenv("VERSITYGW"))
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// TestWalkthroughs runs every walkthrough block of the READMEs.
func TestWalkthroughs(t *testing.T) {
	repo, all := readReadmes(t)
	bin := buildTools(t, repo)
	for _, r := range all {
		blocks := parseBlocks(r.text)
		if len(blocks) == 0 {
			continue // TestEveryCommandBlockRuns says why, if it should have one
		}
		dir := t.TempDir()
		name := strings.ReplaceAll(filepath.Dir(r.path), "/", "-") + ".txtar"
		if r.path == "README.md" {
			name = "root.txtar"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script(blocks, freePorts(t, r.text))), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Run(r.path, func(t *testing.T) {
			t.Parallel() // a walkthrough mostly waits (servers, deletions): run them side by side
			for _, c := range needs[r.path] {
				if _, err := exec.LookPath(c); err != nil {
					t.Skipf("%s needs %s, which this machine lacks (Debian: jq, e2fsprogs, coreutils)", r.path, c)
				}
			}
			testscript.Run(t, testscript.Params{
				Dir: dir,
				Setup: func(e *testscript.Env) error {
					e.Setenv("REPO", repo)
					e.Setenv("BIN", bin)
					for _, k := range passEnv[6:] {
						if v := os.Getenv(k); v != "" && k != "S3_PORT" {
							e.Setenv(k, v)
						}
					}
					srv := &servers{}
					e.Values[serversKey{}] = srv
					e.Defer(srv.stop)
					return nil
				},
				Condition: func(cond string) (bool, error) {
					if cond == "versitygw" {
						return haveVersitygw(), nil
					}
					return false, fmt.Errorf("unknown condition %q", cond)
				},
				Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
					"readme-output": readmeOutput,
					"start-ready":   startReady,
					"stop-servers":  stopServers,
				},
			})
		})
	}
}

// TestEveryCommandBlockRuns holds every README to this package: a block
// of commands is either a walkthrough (so what it shows is what the tools
// print) or says, in its skip marker, why not and what runs it instead.
func TestEveryCommandBlockRuns(t *testing.T) {
	_, all := readReadmes(t)
	for _, r := range all {
		for _, f := range fences(r.text) {
			where := fmt.Sprintf("%s:%d", r.path, f.line)
			switch {
			case f.open:
				t.Errorf("%s: the block is never closed with ```", where)
			case f.mark.bad != "":
				t.Errorf("%s: unknown walkthrough marker %q", where, f.mark.bad)
			case f.mark.skip && f.mark.reason == "":
				t.Errorf("%s: a skipped block says why: <!-- walkthrough: skip: what it needs; what runs it instead -->", where)
			case f.mark.skip:
			case f.walkthrough():
			case f.shell():
				t.Errorf("%s: commands in a %q block run nowhere: write them as a walkthrough (a block with no language, \"$ \" before each command, then its output) or mark the block <!-- walkthrough: skip: why -->", where, f.info)
			}
		}
	}
}

// TestParseMarker covers the marker comments.
func TestParseMarker(t *testing.T) {
	for line, want := range map[string]marker{
		"<!-- walkthrough: skip -->":                           {ok: true, skip: true},
		"<!-- walkthrough: skip: needs a cluster -->":          {ok: true, skip: true, reason: "needs a cluster"},
		"<!-- walkthrough: background -->":                     {ok: true, background: true},
		"<!-- walkthrough: background, needs versitygw -->":    {ok: true, background: true, needs: "versitygw"},
		"<!-- walkthrough: output varies -->":                  {ok: true, varies: true},
		"<!-- walkthrough: run, output varies -->":             {ok: true, varies: true, bad: "run"},
		"<!-- a comment -->":                                   {},
		"<!-- walkthrough: background, needs versitygw, x -->": {ok: true, background: true, needs: "versitygw", bad: "x"},
	} {
		if got := parseMarker(line); got != want {
			t.Errorf("parseMarker(%q) = %+v, want %+v", line, got, want)
		}
	}
}

// written finds, in a command, the files it writes relative to the
// working directory: go build -o NAME, a redirection, and the tools'
// output flags.
var written = regexp.MustCompile(`(?:go build -o|>>?|\s-(?:o|save|state|keep-to))\s+([^\s/$'"][^\s;|&)]*)`)

// TestLeftoversAreIgnored holds .gitignore to what a reader following the
// READMEs in a checkout leaves in it: each tool built with go build, at
// the top or in its own folder, and every file a walkthrough writes
// outside /tmp. (CI also checks that a whole run leaves git status
// clean.)
func TestLeftoversAreIgnored(t *testing.T) {
	repo, all := readReadmes(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	if err := exec.Command("git", "-C", repo, "rev-parse", "--git-dir").Run(); err != nil {
		t.Skipf("%s is not a git checkout", repo)
	}
	var paths []string
	mains, err := filepath.Glob(filepath.Join(repo, "examples", "*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mains {
		tool := filepath.Base(filepath.Dir(m))
		paths = append(paths, tool, "examples/"+tool+"/"+tool)
	}
	if len(paths) == 0 {
		t.Fatal("found no tool under examples/")
	}
	for _, r := range all {
		for _, b := range parseBlocks(r.text) {
			for _, st := range b.steps {
				for _, m := range written.FindAllStringSubmatch(st.cmd, -1) {
					paths = append(paths, m[1])
				}
			}
		}
	}
	for _, p := range paths {
		// check-ignore exits 1 for a path no rule ignores.
		if err := exec.Command("git", "-C", repo, "check-ignore", "-q", "--no-index", p).Run(); err != nil {
			t.Errorf("%s, which the READMEs or go build leave in a checkout, is not in .gitignore (git check-ignore: %v)", p, err)
		}
	}
}

// TestMatchLines covers the README's elisions.
func TestMatchLines(t *testing.T) {
	for _, c := range []struct {
		got, want []string
		ok        bool
	}{
		{[]string{"a", "b", "c"}, []string{"a", "...", "c"}, true},
		{[]string{"a", "c"}, []string{"a", "...", "c"}, true},
		{[]string{"a", "b"}, []string{"a", "...", "c"}, false},
		{[]string{"flags: -x 1 -y 2"}, []string{"flags: -x 1 ..."}, true},
		{[]string{"flags: -x 2 -y 2"}, []string{"flags: -x 1 ..."}, false},
		{[]string{"a", "b"}, []string{"a"}, false},
		{[]string{"url http://127.0.0.1:4711"}, []string{"url http://127.0.0.1:10999"}, true},
	} {
		if got := matchLines(c.got, c.want); got != c.ok {
			t.Errorf("matchLines(%q, %q) = %v, want %v", c.got, c.want, got, c.ok)
		}
	}
}
