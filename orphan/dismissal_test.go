package orphan_test

import (
	"testing"

	"github.com/caretaker-storage/caretaker/orphan"
)

// A dismissal keeps data: every value but a clear "no" dismisses, and
// only the spellings a person would mean as yes are "known".
func TestParseDismissal(t *testing.T) {
	for _, c := range []struct {
		value   string
		present bool
		dis     bool
		known   bool
	}{
		{"", false, false, true},
		{"", true, false, true},
		{"false", true, false, true},
		{"False", true, false, true},
		{" FALSE ", true, false, true},
		{"0", true, false, true},
		{"no", true, false, true},
		{"off", true, false, true},
		{"true", true, true, true},
		{"True", true, true, true},
		{"TRUE", true, true, true},
		{"1", true, true, true},
		{"yes", true, true, true},
		{"Yes", true, true, true},
		{"on", true, true, true},
		{"dismiss", true, true, false},
		{"true!", true, true, false},
		{"2", true, true, false},
	} {
		dis, known := orphan.ParseDismissal(c.value, c.present)
		if dis != c.dis || known != c.known {
			t.Errorf("ParseDismissal(%q, %v) = %v, %v; want %v, %v", c.value, c.present, dis, known, c.dis, c.known)
		}
	}
}
