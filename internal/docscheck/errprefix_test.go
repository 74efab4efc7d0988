package docscheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/internal/errclass"
	"github.com/caretaker-storage/caretaker/salvage"
	"github.com/caretaker-storage/caretaker/tokenring"
)

// module is the import path of the repository's root module.
const module = "github.com/caretaker-storage/caretaker"

// TestSentinelsCarryTheirPackagePrefix: every exported error value of a
// library package says which package it comes from ("diskscan: corrupt
// input"). The packages and their Err... variables are found by parsing
// the source, and their texts are read from the compiled values, so a new
// package or sentinel is checked the day it is added. A variable that takes
// another package's value (ErrNotFound = errclass.ErrNotFound in orphan,
// backupdelete, ...; ErrLockLost = lhformat.ErrLockLost in both backup
// stores), when another library package exports that value too, is a
// class they share, so that errors.Is matches across them: its text cannot
// carry every exporter's prefix, and it is not checked. Where a library
// package makes the value itself, that package's prefix is checked.
func TestSentinelsCarryTheirPackagePrefix(t *testing.T) {
	pkgs := libraryPackages(t)
	got := readSentinels(t, pkgs)
	checked := 0
	var shared []string
	for _, s := range got {
		if s.Shared && s.Alias {
			shared = append(shared, s.Dir+"."+s.Name)
		} else {
			checked++
		}
	}
	t.Logf("%d sentinels checked; shared by several packages, not checked: %v", checked, shared)
	// A walk or a parse that found nothing would pass vacuously.
	for _, dir := range []string{"orphan", "diskscan", "salvage", "tokenring", "backupdelete", "backupdelete/fsstore", "backupdelete/s3store", "spdk", "spdk/spdkrpc"} {
		if !slices.ContainsFunc(got, func(s sentinel) bool { return s.Dir == dir }) {
			t.Errorf("no sentinel found in %s: the walk or the parse is broken", dir)
		}
	}
	if checked < 80 {
		t.Errorf("checked %d sentinels; the library has more than 80", checked)
	}
	for _, p := range prefixProblems(got) {
		t.Error(p)
	}
}

// TestPrefixCheckCatchesABadSentinel: over fixture packages whose
// sentinels nobody listed anywhere, the same parse, probe and check find
// the sentinel without its package's prefix, the nil one, the two names
// of one unprefixed value, and the unprefixed value a package makes
// itself although another takes it too; they pass the prefixed one and
// the taker of a shared value.
func TestPrefixCheckCatchesABadSentinel(t *testing.T) {
	got := readSentinels(t, []pkgDir{
		{Dir: "internal/docscheck/testdata/badsentinel", Name: "badsentinel"},
		{Dir: "internal/docscheck/testdata/badsentinel/other", Name: "other"},
	})
	var names []string
	for _, s := range got {
		names = append(names, s.Pkg+"."+s.Name)
	}
	want := []string{"badsentinel.ErrBad", "badsentinel.ErrGood", "badsentinel.ErrNil", "badsentinel.ErrShared", "badsentinel.ErrTwin", "badsentinel.ErrTwinAgain", "other.ErrShared"}
	if !slices.Equal(names, want) {
		t.Fatalf("sentinels found %v, want %v", names, want)
	}
	const dir = "internal/docscheck/testdata/badsentinel"
	problems := prefixProblems(got)
	wantProblems := []string{
		dir + `.ErrBad = "no package prefix"; want it to start with "badsentinel: "`,
		dir + `.ErrNil is nil`,
		dir + `.ErrTwin = "twin: no prefix either"; want it to start with "badsentinel: "`,
		dir + `.ErrTwinAgain = "twin: no prefix either"; want it to start with "badsentinel: "`,
		dir + `/other.ErrShared = "a shared class"; want it to start with "other: "`,
	}
	if !slices.Equal(problems, wantProblems) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(wantProblems, "\n"))
	}
}

// TestMalformedAndRedirectAreOneClass: each package's malformed-input and
// redirect sentinels are its own (their texts differ) and match one
// another and the class under errors.Is, so a host catches "any malformed
// input" with one test.
func TestMalformedAndRedirectAreOneClass(t *testing.T) {
	for class, errs := range map[error][]error{
		errclass.ErrMalformed: {diskscan.ErrCorrupt, salvage.ErrCorrupt, tokenring.ErrMalformedReply},
		errclass.ErrRedirect:  {tokenring.ErrRedirect},
	} {
		for _, a := range errs {
			if !errors.Is(a, class) {
				t.Errorf("%q is not of class %q", a, class)
			}
			for _, b := range errs {
				if !errors.Is(a, b) {
					t.Errorf("errors.Is(%q, %q) is false; both are of class %q", a, b, class)
				}
			}
		}
	}
	if errors.Is(diskscan.ErrCorrupt, tokenring.ErrRedirect) || errors.Is(tokenring.ErrRedirect, tokenring.ErrMalformedReply) {
		t.Error("a malformed-input sentinel matches a redirect")
	}
	if errors.Is(diskscan.ErrNotRegular, diskscan.ErrCorrupt) || errors.Is(salvage.ErrQcow2Corrupt, salvage.ErrCorrupt) {
		t.Error("a sentinel outside the malformed class matches one in it")
	}
}

// pkgDir is a package: its directory relative to the repository's root,
// with slashes, and its name.
type pkgDir struct{ Dir, Name string }

// sentinel is what the probe program reports of one exported Err...
// variable.
type sentinel struct {
	Dir, Name, Pkg string
	Text           string
	Nil            bool
	// Shared: another package of the run exports the same value (two
	// names in one package for one value are both checked).
	Shared bool
	// Alias: the variable's initializer is another package's variable
	// (pkg.ErrX): the package takes the value, it does not make it.
	Alias bool
}

// prefixProblems returns, in order, a line for each sentinel that is nil
// or, unless shared, whose text does not start with its package's name
// and ": ".
func prefixProblems(got []sentinel) []string {
	var problems []string
	for _, s := range got {
		prefix := s.Pkg + ": "
		switch {
		case s.Nil:
			problems = append(problems, fmt.Sprintf("%s.%s is nil", s.Dir, s.Name))
		case s.Shared && s.Alias:
		case !strings.HasPrefix(s.Text, prefix):
			problems = append(problems, fmt.Sprintf("%s.%s = %q; want it to start with %q", s.Dir, s.Name, s.Text, prefix))
		}
	}
	return problems
}

// libraryPackages returns every package of the root module a host
// imports: not under internal/ or examples/ (whose programs and nested
// modules are hosts), not mocks, not testdata.
func libraryPackages(t *testing.T) []pkgDir {
	t.Helper()
	var pkgs []pkgDir
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		switch d.Name() {
		case "internal", "examples", "mocks", "testdata":
			return filepath.SkipDir
		}
		if strings.HasPrefix(d.Name(), ".") && path != repoRoot {
			return filepath.SkipDir
		}
		names, err := goFiles(path)
		if err != nil || len(names) == 0 {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(path, names[0]), nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		pkgs = append(pkgs, pkgDir{Dir: filepath.ToSlash(rel), Name: f.Name.Name})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// goFiles returns the non-test .go files of dir that this platform
// builds.
func goFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, n); err != nil || !ok {
			continue
		}
		names = append(names, n)
	}
	return names, nil
}

// errorVar is an exported package-level variable named Err...: its name,
// and whether its initializer is another package's variable.
type errorVar struct {
	name  string
	alias bool
}

// exportedErrorVars returns the exported package-level variables named
// Err... in the files of dir that this platform builds, sorted by name.
func exportedErrorVars(t *testing.T, dir string) []errorVar {
	t.Helper()
	files, err := goFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var vars []errorVar
	fset := token.NewFileSet()
	for _, n := range files {
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !id.IsExported() || !strings.HasPrefix(id.Name, "Err") {
						continue
					}
					v := errorVar{name: id.Name}
					if i < len(vs.Values) {
						_, v.alias = vs.Values[i].(*ast.SelectorExpr)
					}
					vars = append(vars, v)
				}
			}
		}
	}
	slices.SortFunc(vars, func(a, b errorVar) int { return strings.Compare(a.name, b.name) })
	return vars
}

// readSentinels finds the exported Err... variables of pkgs by parsing
// them, then reads their values by building and running a program that
// imports every package and prints each variable (a test cannot name a
// variable it found at run time). The program is laid over the module's
// tree with go run -overlay, so it may import internal packages and
// fixtures under testdata; nothing is written into the tree.
func readSentinels(t *testing.T, pkgs []pkgDir) []sentinel {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	var src bytes.Buffer
	src.WriteString("package main\n\nimport (\n\t\"encoding/json\"\n\t\"os\"\n")
	var body bytes.Buffer
	n := 0
	for i, p := range pkgs {
		vars := exportedErrorVars(t, filepath.Join(root, filepath.FromSlash(p.Dir)))
		if len(vars) == 0 {
			continue
		}
		fmt.Fprintf(&src, "\tp%d %q\n", i, module+"/"+p.Dir)
		for _, v := range vars {
			fmt.Fprintf(&body, "\tadd(%q, %q, %q, %v, p%d.%s)\n", p.Dir, v.name, p.Name, v.alias, i, v.name)
			n++
		}
	}
	if n == 0 {
		return nil
	}
	src.WriteString(")\n\n" + probeTypes + "\nfunc main() {\n")
	src.Write(body.Bytes())
	src.WriteString("\tfor i := range vals {\n\t\tfor j := range vals {\n\t\t\tif out[i].Dir != out[j].Dir && vals[i] != nil && vals[i] == vals[j] {\n\t\t\t\tout[i].Shared = true\n\t\t\t}\n\t\t}\n\t}\n\tif err := json.NewEncoder(os.Stdout).Encode(out); err != nil {\n\t\tos.Exit(1)\n\t}\n}\n")

	tmp := t.TempDir()
	mainGo := filepath.Join(tmp, "main.go")
	if err := os.WriteFile(mainGo, src.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, "internal", "docscheck", "sentinelprobe", "main.go"): mainGo}})
	overlayFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to read the sentinels' values: %v", err)
	}
	cmd := exec.Command(goTool, "run", "-overlay="+overlayFile, "./internal/docscheck/sentinelprobe")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the sentinel probe failed: %v\n%s\nits source:\n%s", err, stderr.Bytes(), src.Bytes())
	}
	var got []sentinel
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the sentinel probe printed %q: %v", out, err)
	}
	if len(got) != n {
		t.Fatalf("the probe reported %d sentinels, the parse found %d", len(got), n)
	}
	return got
}

// probeTypes is the probe program's collector. Comparing two error values
// with == panics when their dynamic type is not comparable; a sentinel's
// is a pointer or a comparable struct, so a panic here is a finding too.
const probeTypes = `type sentinel struct {
	Dir, Name, Pkg string
	Text           string
	Nil            bool
	Shared, Alias  bool
}

var (
	out  []sentinel
	vals []error
)

func add(dir, name, pkg string, alias bool, err error) {
	s := sentinel{Dir: dir, Name: name, Pkg: pkg, Alias: alias, Nil: err == nil}
	if err != nil {
		s.Text = err.Error()
	}
	out = append(out, s)
	vals = append(vals, err)
}
`
