package errclass

import (
	"errors"
	"fmt"
	"testing"
)

func TestSentinelsOfOneClassMatchAcrossPackages(t *testing.T) {
	a := New("diskscan", "corrupt input", ErrMalformed)
	b := New("spdk", "unexpected result", ErrMalformed)
	r := New("tokenring", "redirect refused", ErrRedirect)
	err := fmt.Errorf("reading x: %w", a)

	if got := err.Error(); got != "reading x: diskscan: corrupt input" {
		t.Fatalf("text %q lost the package prefix", got)
	}
	for _, c := range []struct {
		target error
		want   bool
	}{
		{a, true}, {b, true}, {ErrMalformed, true},
		{r, false}, {ErrRedirect, false}, {ErrNotFound, false},
	} {
		if got := errors.Is(err, c.target); got != c.want {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", err, c.target, got, c.want)
		}
	}
	if errors.Is(fmt.Errorf("x: %w", r), a) {
		t.Error("a redirect matched a malformed sentinel")
	}
}
