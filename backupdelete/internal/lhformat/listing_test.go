package lhformat

import (
	"errors"
	"testing"
)

func TestUnlistedLast(t *testing.T) {
	listed := []string{"backup-1", "backup-3"}
	for _, c := range []struct {
		last, deleting string
		names          []string
		want           string
	}{
		{"backup-3", "backup-2", listed, ""},                     // listed
		{"backup-2", "backup-2", listed, ""},                     // the one being deleted
		{"", "backup-2", listed, ""},                             // no backup yet, or the last one deleted
		{"backup-4", "backup-2", listed, "backup-4"},             // left out: look it up
		{"backup-4", "", listed, "backup-4"},                     // a collection that deletes no backup
		{"backup-1", "backup-2", nil, "backup-1"},                // an empty listing
		{"backup-3", "backup-2", []string{"backup-3"}, ""},       // the only one
		{"backup-30", "backup-2", listed, "backup-30"},           // a prefix is not a match
		{"backup-", "backup-2", []string{"backup-1"}, "backup-"}, // nor the other way round
	} {
		if got, err := UnlistedLast(c.last, c.deleting, c.names); got != c.want || err != nil {
			t.Errorf("UnlistedLast(%q, %q, %q) = %q, %v; want %q", c.last, c.deleting, c.names, got, err, c.want)
		}
	}
	for _, last := range []string{"../../volume", "a/b", "x", ".hidden", "backup-1\x00"} {
		if got, err := UnlistedLast(last, "backup-2", listed); !errors.Is(err, ErrCorrupt) || got != "" {
			t.Errorf("UnlistedLast(%q) = %q, %v; want ErrCorrupt", last, got, err)
		}
	}
	for _, err := range []error{UnlistedLastError("vol-a", "backup-4", 2), PageDisagreement("vol-a", 1000, 1000, 1200)} {
		if !errors.Is(err, ErrListingInconsistent) {
			t.Errorf("%v does not wrap ErrListingInconsistent", err)
		}
	}
}
