package backupdelete

import (
	"regexp"
	"testing"
)

// FuzzValidName checks the hand-written ValidName against Longhorn's
// regular expression.
func FuzzValidName(f *testing.F) {
	re := regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)
	for _, s := range []string{"", "a", "ab", "backup-0123456789abcdef", "_a", ".a", "-a", "a/b", "..", "a..", "pvc-1.2_3", "é1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := len(s) <= 253 && re.MatchString(s)
		if got := ValidName(s); got != want {
			t.Fatalf("ValidName(%q) = %v, want %v", s, got, want)
		}
	})
}
