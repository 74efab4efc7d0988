package docscheck

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestInternalImportsRunDownward: no non-test file under internal/ imports
// a public package of the module. A helper package that imported orphan or
// diskscan would tie the house's foundations to its upper floors (and to
// every import cycle that follows).
func TestInternalImportsRunDownward(t *testing.T) {
	const module = "github.com/caretaker-storage/caretaker/"
	internal := filepath.Join(repoRoot, "internal")
	checked := 0
	err := filepath.WalkDir(internal, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, module) && !strings.HasPrefix(p, module+"internal/") {
				rel, _ := filepath.Rel(repoRoot, path)
				t.Errorf("%s imports %s: non-test code under internal/ imports only the standard library, dependencies and other internal packages", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("checked %d files under %s; the walk found too few to mean anything", checked, internal)
	}
}
