package errclass

import (
	"errors"
	"io/fs"
	"testing"
)

func TestWrapfPrefixesOnceAndKeepsTheChain(t *testing.T) {
	inner := New("diskscan", "corrupt input", ErrMalformed)
	err := Wrapf("diskscan", inner, "disk %s", "n1/d1")
	if got, want := err.Error(), "diskscan: disk n1/d1: corrupt input"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	if !errors.Is(err, inner) || !errors.Is(err, ErrMalformed) {
		t.Error("the chain is lost")
	}
	foreign := Wrapf("diskscan", fs.ErrNotExist, "open %s", "x")
	if got, want := foreign.Error(), "diskscan: open x: file does not exist"; got != want || !errors.Is(foreign, fs.ErrNotExist) {
		t.Errorf("text %q, want %q, and fs.ErrNotExist in the chain", got, want)
	}
}
