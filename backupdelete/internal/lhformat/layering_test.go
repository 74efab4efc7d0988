package lhformat

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayering: the Longhorn backupstore packages import downwards only.
// lhformat (the format) imports no caretaker package but internal/errclass;
// neither store imports the other (what they share lives in internal/lhstore
// and here); lhstore imports no store. Test files are not looked at.
func TestLayering(t *testing.T) {
	const mod = "github.com/caretaker-storage/caretaker/"
	for _, c := range []struct {
		dir       string
		forbidden func(imp string) bool
	}{
		{".", func(imp string) bool {
			return strings.HasPrefix(imp, mod) && imp != mod+"internal/errclass"
		}},
		{"../../s3store", func(imp string) bool { return imp == mod+"backupdelete/fsstore" }},
		{"../../fsstore", func(imp string) bool { return imp == mod+"backupdelete/s3store" }},
		{"../lhstore", func(imp string) bool {
			return imp == mod+"backupdelete/fsstore" || imp == mod+"backupdelete/s3store"
		}},
	} {
		files, err := filepath.Glob(filepath.Join(c.dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Errorf("%s: no Go files", c.dir)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if c.forbidden(p) {
					t.Errorf("%s imports %s", f, p)
				}
			}
		}
	}
}
