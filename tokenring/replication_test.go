package tokenring

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// twoDCs: A and B in dc1, C and D in dc2.
var twoDCs = ring(map[string]Location{
	"A": {"dc1", "r1"}, "B": {"dc1", "r2"}, "C": {"dc2", "r1"}, "D": {"dc2", "r2"},
}, 10, "A", 20, "C", 30, "B", 40, "D")

// TestReplicationMustMatchTheRing: a replication that asks for no replicas,
// or for replicas in a datacenter the ring does not have, is a typed error
// naming the keyspace, not an analysis in which every node lost
// everything.
func TestReplicationMustMatchTheRing(t *testing.T) {
	good := nts(map[string]int{"dc1": 2, "dc2": 2})
	for _, tc := range []struct {
		name    string
		repl    Replication
		ring    Ring
		want    []error
		message []string
	}{
		{"datacenter typo", nts(map[string]int{"DC1": 2, "dc2": 2}), twoDCs,
			[]error{ErrUnknownDatacenter, ErrInvalidReplication}, []string{`keyspace "ks"`, `datacenter "DC1" (factor 2)`, `the ring has "dc1", "dc2"`}},
		{"another cluster's datacenter only", nts(map[string]int{"eu-west": 3}), twoDCs,
			[]error{ErrUnknownDatacenter, ErrInvalidReplication}, []string{`"eu-west"`}},
		{"empty ring", good, Ring{}, []error{ErrUnknownDatacenter}, []string{"no datacenter"}},
		{"SimpleStrategy factor 0", simple(0), twoDCs, []error{ErrInvalidReplication}, []string{"factor 0", "at least 1"}},
		{"SimpleStrategy negative factor", simple(-3), twoDCs, []error{ErrInvalidReplication}, []string{"-3"}},
		{"every datacenter at 0", nts(map[string]int{"dc1": 0, "dc2": 0}), twoDCs, []error{ErrInvalidReplication}, []string{"no replicas anywhere"}},
		{"no datacenter at all", nts(nil), twoDCs, []error{ErrInvalidReplication}, []string{"no replicas anywhere"}},
		{"negative datacenter factor", nts(map[string]int{"dc1": 3, "dc2": -1}), twoDCs, []error{ErrInvalidReplication}, []string{`"dc2" has factor -1`}},
		{"endpoint without datacenter", good, ring(map[string]Location{"A": {"dc1", "r1"}}, 10, "A", 20, "B"), []error{ErrMissingLocation}, []string{`"B"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := Topology{Ring: tc.ring, Keyspaces: map[string]Replication{"ok": simple(1), "ks": tc.repl}}
			fine := Topology{Ring: twoDCs, Keyspaces: map[string]Replication{"ok": simple(1), "ks": good}}
			for _, err := range []error{bad.Validate(), analyzeErr(bad, fine), analyzeErr(fine, bad)} {
				for _, want := range tc.want {
					if !errors.Is(err, want) {
						t.Errorf("error %v does not wrap %v", err, want)
					}
				}
				for _, m := range tc.message {
					if err != nil && !strings.Contains(err.Error(), m) {
						t.Errorf("error %q does not say %q", err, m)
					}
				}
			}
			if err := analyzeErr(bad, fine); err != nil && !strings.HasPrefix(err.Error(), "tokenring: before: ") {
				t.Errorf("error %q does not say which topology", err)
			}
		})
	}
}

func analyzeErr(before, after Topology) error {
	a, err := Analyze(before, after)
	if err == nil || a.Nodes != nil {
		return errors.Join(err, errors.New("Analyze returned an analysis"))
	}
	return err
}

// TestDrainedDatacenterIsValid: a factor of 0 is how a datacenter is
// drained before it goes, and it may name a datacenter already gone; the
// drained datacenter's nodes lose their ranges, the others do not.
func TestDrainedDatacenterIsValid(t *testing.T) {
	before := Topology{twoDCs, one("ks", nts(map[string]int{"dc1": 2, "dc2": 2}))}
	after := Topology{twoDCs, one("ks", nts(map[string]int{"dc1": 2, "dc2": 0, "gone": 0}))}
	if err := after.Validate(); err != nil {
		t.Fatal(err)
	}
	a := mustAnalyze(t, before, after)
	if got, want := a.NeedsCleanup(), []string{"C", "D"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("NeedsCleanup = %v, want %v (only dc2 was drained)", got, want)
	}
}
