package hostkit_test

import (
	"context"
	"slices"
	"testing"

	"github.com/caretaker-storage/caretaker/examples/kube/hostkit"
	"github.com/caretaker-storage/caretaker/orphan"
)

func names(recs []orphan.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return out
}

func create(t *testing.T, s orphan.Store, name, node string) {
	t.Helper()
	if _, err := s.Create(context.Background(), orphan.Record{Name: name, NodeID: node, Kind: orphan.KindReplicaData}); err != nil {
		t.Fatal(err)
	}
}

// TestPinnedListAnswersThePinnedListOnce: a record created after Pin is
// not in the Sweeper's next List (its volume was not read), but is in the
// one after; a List of another selector is the wrapped Store's.
func TestPinnedListAnswersThePinnedListOnce(t *testing.T) {
	ctx := context.Background()
	mem := orphan.NewMemStore()
	create(t, mem, "a", "node-1")
	p := hostkit.NewPinned(mem)
	sel := orphan.Selector{NodeID: "node-1"}
	recs, err := p.Pin(ctx, sel)
	if err != nil || !slices.Equal(names(recs), []string{"a"}) {
		t.Fatalf("Pin = %v, %v; want [a]", names(recs), err)
	}
	recs[0].Name = "changed by the host" // the pin keeps its own copy
	create(t, mem, "b", "node-1")
	if got, err := p.List(ctx, sel); err != nil || !slices.Equal(names(got), []string{"a"}) {
		t.Fatalf("List after Pin = %v, %v; want the pinned [a]", names(got), err)
	}
	if got, err := p.List(ctx, sel); err != nil || !slices.Equal(names(got), []string{"a", "b"}) {
		t.Fatalf("second List = %v, %v; want the store's [a b]", names(got), err)
	}

	if _, err := p.Pin(ctx, sel); err != nil {
		t.Fatal(err)
	}
	create(t, mem, "c", "node-2")
	other := orphan.Selector{}
	if got, err := p.List(ctx, other); err != nil || !slices.Equal(names(got), []string{"a", "b", "c"}) {
		t.Fatalf("List of another selector = %v, %v; want the store's [a b c]", names(got), err)
	}
	if got, _ := p.List(ctx, sel); !slices.Equal(names(got), []string{"a", "b"}) {
		t.Fatalf("List after a List of another selector = %v; want the store's [a b] (a pin is used once)", names(got))
	}
}

// TestPinnedUnpinDropsAnUnusedPin: a sweep that failed before listing
// leaves no old list for the next one.
func TestPinnedUnpinDropsAnUnusedPin(t *testing.T) {
	ctx := context.Background()
	mem := orphan.NewMemStore()
	p := hostkit.NewPinned(mem)
	sel := orphan.Selector{NodeID: "node-1"}
	if _, err := p.Pin(ctx, sel); err != nil {
		t.Fatal(err)
	}
	p.Unpin()
	create(t, mem, "a", "node-1")
	if got, _ := p.List(ctx, sel); !slices.Equal(names(got), []string{"a"}) {
		t.Fatalf("List after Unpin = %v; want the store's [a]", names(got))
	}
}

// TestPinnedUnwrap: the Sweeper finds the wrapped Store's ledger
// (orphan.LedgerStore) through Unwrap.
func TestPinnedUnwrap(t *testing.T) {
	mem := orphan.NewMemStore()
	p := hostkit.NewPinned(mem)
	if _, ok := p.Unwrap().(orphan.LedgerStore); !ok || p.Unwrap() != orphan.Store(mem) {
		t.Fatalf("Unwrap = %T; want the wrapped MemStore", p.Unwrap())
	}
}
