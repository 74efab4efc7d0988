package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository's root, two levels up from this package.
const repoRoot = "../.."

// index is what the repository's Go files declare.
type index struct {
	pkgs    map[string]map[string]bool // package name -> its top-level names, and Type.Member
	members map[string]map[string]bool // type name -> its methods and fields, in any package
	names   map[string]bool            // every declared name, and every word of a string literal
	goFiles [][]string                 // each .go file's non-empty lines, trimmed
}

func buildIndex(t *testing.T) *index {
	t.Helper()
	ix := &index{pkgs: map[string]map[string]bool{}, members: map[string]map[string]bool{}, names: map[string]bool{}}
	for _, n := range kubernetesNames {
		ix.names[n] = true
	}
	fset := token.NewFileSet()
	word := regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != repoRoot && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == "Makefile" || strings.HasSuffix(path, ".sh") {
			// Make variables and targets are code names too (`FUZZTIME`).
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, w := range word.FindAllString(string(src), -1) {
				ix.names[w] = true
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, filepath.Join("docscheck", "docs_test.go")) {
			return nil // this file names stale code on purpose
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		ix.goFiles = append(ix.goFiles, normalize(string(src)))
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := strings.TrimSuffix(f.Name.Name, "_test")
		decls := ix.pkgs[pkg]
		if decls == nil {
			decls = map[string]bool{}
			ix.pkgs[pkg] = decls
		}
		member := func(typ, name string) {
			if ix.members[typ] == nil {
				ix.members[typ] = map[string]bool{}
			}
			ix.members[typ][name] = true
			decls[typ+"."+name] = true
			ix.names[name] = true
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					if s, err := strconv.Unquote(n.Value); err == nil {
						for _, w := range word.FindAllString(s, -1) {
							ix.names[w] = true
						}
					}
				}
			case *ast.Ident:
				ix.names[n.Name] = true // locals too: a README may name a variable of an example
			}
			return true
		})
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					decls[d.Name.Name] = true
					continue
				}
				if typ := recvType(d.Recv.List[0].Type); typ != "" {
					member(typ, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						decls[s.Name.Name] = true
						switch typ := s.Type.(type) {
						case *ast.StructType:
							for _, fld := range typ.Fields.List {
								for _, n := range fld.Names {
									member(s.Name.Name, n.Name)
								}
								if len(fld.Names) == 0 { // embedded: its name is the type's
									if n := recvType(fld.Type); n != "" {
										member(s.Name.Name, n)
									}
								}
							}
						case *ast.InterfaceType:
							for _, m := range typ.Methods.List {
								for _, n := range m.Names {
									member(s.Name.Name, n.Name)
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							decls[n.Name] = true
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// recvType is the name of a receiver or embedded type: T, *T, T[X], pkg.T.
func recvType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvType(e.X)
	case *ast.IndexExpr:
		return recvType(e.X)
	case *ast.IndexListExpr:
		return recvType(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// normalize returns text's non-empty lines, trimmed.
func normalize(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// markdownFiles are the repository's markdown files.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != repoRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no markdown files found")
	}
	return files
}

// kubernetesNames are Kubernetes API names the READMEs use that no Go
// file of this repository spells: status reasons and object fields.
var kubernetesNames = []string{"AlreadyExists", "Conflict", "NotFound", "managedFields"}

var (
	fence    = regexp.MustCompile("(?ms)^[ \t]*```([a-z]*)[ \t]*\n(.*?)^[ \t]*```")
	backtick = regexp.MustCompile("`([^`\n]+)`")
	// pkgRef is pkg.Name or pkg.Name.Member; typeRef is Type.Member.
	pkgRef  = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?`)
	typeRef = regexp.MustCompile(`(?:^|[^.\w])([A-Z][A-Za-z0-9_]*)\.([A-Z][A-Za-z0-9_]*)`)
	// ident is a whole backticked span that is one Go identifier in
	// mixed case (plain words like `replicas` are prose, not code).
	ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// goPath is a backticked path to a Go or YAML file.
	goPath = regexp.MustCompile(`^[\w./-]+\.(go|yaml)$`)
)

// TestMarkdownNamesExist fails, naming each, for every code name in a
// markdown file that the repository does not declare.
func TestMarkdownNamesExist(t *testing.T) {
	ix := buildIndex(t)
	for _, md := range markdownFiles(t) {
		src, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		text := string(src)
		var spans []string
		for _, m := range fence.FindAllStringSubmatch(text, -1) {
			if m[1] == "go" {
				spans = append(spans, m[2])
			}
		}
		prose := fence.ReplaceAllString(text, "")
		for _, m := range backtick.FindAllStringSubmatch(prose, -1) {
			spans = append(spans, m[1])
		}
		rel, _ := filepath.Rel(repoRoot, md)
		for _, span := range spans {
			for _, problem := range ix.check(span, filepath.Dir(md)) {
				t.Errorf("%s: %s", rel, problem)
			}
		}
	}
}

// check returns what span names that does not exist.
func (ix *index) check(span, dir string) []string {
	var problems []string
	for _, m := range pkgRef.FindAllStringSubmatch(span, -1) {
		decls, ok := ix.pkgs[m[1]]
		if !ok {
			continue // not one of ours: a local variable, another module's package
		}
		name := m[2]
		if !decls[name] {
			problems = append(problems, "no "+m[1]+"."+name)
			continue
		}
		if m[3] != "" && !decls[name+"."+m[3]] && !ix.members[name][m[3]] {
			problems = append(problems, "no "+m[1]+"."+name+"."+m[3])
		}
	}
	for _, m := range typeRef.FindAllStringSubmatch(span, -1) {
		if members, ok := ix.members[m[1]]; ok && !members[m[2]] {
			problems = append(problems, "no "+m[1]+"."+m[2])
		}
	}
	if ident.MatchString(span) && span != strings.ToLower(span) && !ix.names[span] {
		problems = append(problems, "no identifier "+span)
	}
	if goPath.MatchString(span) {
		_, err1 := os.Stat(filepath.Join(dir, span))
		_, err2 := os.Stat(filepath.Join(repoRoot, span))
		if err1 != nil && err2 != nil {
			problems = append(problems, "no file "+span)
		}
	}
	return problems
}

// TestMarkdownGoSnippetsAreRealCode fails for every ```go block of a
// markdown file whose lines are not, in order, the lines of a .go file
// of the repository (which the build compiles and vet checks).
func TestMarkdownGoSnippetsAreRealCode(t *testing.T) {
	ix := buildIndex(t)
	for _, md := range markdownFiles(t) {
		src, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, md)
		for _, m := range fence.FindAllStringSubmatch(string(src), -1) {
			if m[1] != "go" {
				continue
			}
			block := normalize(m[2])
			if !slices.ContainsFunc(ix.goFiles, func(lines []string) bool { return containsRun(lines, block) }) {
				t.Errorf("%s: this Go snippet is not the text of any .go file in the repository (put it in one the build compiles):\n%s", rel, m[2])
			}
		}
	}
}

// containsRun reports whether run appears in lines as a contiguous run.
func containsRun(lines, run []string) bool {
	if len(run) == 0 {
		return true
	}
	for i := 0; i+len(run) <= len(lines); i++ {
		if slices.Equal(lines[i:i+len(run)], run) {
			return true
		}
	}
	return false
}

// TestCheckFindsStaleNames: the check itself fails names that do not
// exist, and passes names that do.
func TestCheckFindsStaleNames(t *testing.T) {
	ix := buildIndex(t)
	for _, span := range []string{"diskscan.DiskSet", "orphantest.RunStoreTests", "presentJudge", "agent/nosuch.go", "orphan.Cycle.NoSuchField", "Sweeper.Walk"} {
		if len(ix.check(span, repoRoot)) == 0 {
			t.Errorf("%q passed the check", span)
		}
	}
	for _, span := range []string{"diskscan.NewOrphans", "orphan.Cycle.Scopes", "orphantest.RunConformanceTests(t, orphantest.Harness{Store: ...})", "Sweeper.Reconcile(ctx, latest.Snapshot, cycle)", "DataCleanable", "doc.go"} {
		if p := ix.check(span, repoRoot); len(p) != 0 {
			t.Errorf("%q failed the check: %v", span, p)
		}
	}
}
