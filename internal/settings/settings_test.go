package settings

import (
	"errors"
	"testing"
)

func TestTrimIsASCIIOnly(t *testing.T) {
	if got := Trim(" \tv1\n"); got != "v1" {
		t.Fatalf("Trim = %q", got)
	}
	if got := Trim("\u00a0v1"); got != "\u00a0v1" {
		t.Fatalf("Trim removed a non-ASCII space: %q", got)
	}
}

func TestError(t *testing.T) {
	err := error(&Error{Setting: "s", Value: "a;b", Item: "b", Reason: "unknown item", Allowed: []string{"a"}})
	if !errors.Is(err, ErrInvalid) {
		t.Fatal("not ErrInvalid")
	}
	if got, want := err.Error(), `setting s="a;b": item "b": unknown item (accepted: a)`; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}
