package orphan

import (
	"encoding/hex"
	"strings"
	"testing"
)

// TestParseNameIsTheInverseOfSpelling: a record name parses back to its
// sum exactly when it is a name Decide could have computed; any other
// spelling (upper-case hex, another prefix, another length) is no item's
// name and must not find a candidate.
func TestParseNameIsTheInverseOfSpelling(t *testing.T) {
	it := Item{Kind: KindBackup, Parameters: map[string]string{ParamBackupTarget: "t", ParamBackupVolume: "v", ParamBackupName: "b"}}
	sum, err := it.nameSum()
	if err != nil {
		t.Fatal(err)
	}
	name, _ := it.Name()
	if got, ok := parseName(name); !ok || got != sum {
		t.Fatalf("parseName(%s) = %x, %v; want %x", name, got, ok, sum)
	}
	hexPart := name[len(NamePrefix):]
	for _, bad := range []string{
		NamePrefix + strings.ToUpper(hexPart),
		NamePrefix + hexPart[:63] + "A",
		NamePrefix + hexPart[:63] + "g",
		NamePrefix + hexPart[:63],
		NamePrefix + hexPart + "0",
		"orphan_" + hexPart,
		"",
	} {
		if _, ok := parseName(bad); ok {
			t.Errorf("parseName(%q) accepted a name no item has", bad)
		}
	}
}

// TestSumTableConfirmsWholeSums: sums that share the eight bytes the
// table is addressed and tagged by are still different names, also across
// growth.
func TestSumTableConfirmsWholeSums(t *testing.T) {
	tab := newSumTable(0, new([]sumSlot))
	var named []namedCandidate
	for i := range 100 {
		var s nameSum
		s[0] = 0xab     // every sum shares its leading bytes...
		s[31] = byte(i) // ...and differs only at the end
		s[30] = byte(i % 3)
		tab.makeRoom(named)
		j, ok := tab.find(&s, named)
		if ok {
			t.Fatalf("sum %d found before it was set", i)
		}
		named = append(named, namedCandidate{sum: s})
		tab.set(j, &s, i)
	}
	for i := range named {
		j, ok := tab.find(&named[i].sum, named)
		if !ok || tab.slots[j].index() != i {
			t.Fatalf("sum %d: slot %+v, found %v", i, tab.slots[j], ok)
		}
	}
	other := named[0].sum
	other[15] = 1
	if _, ok := tab.find(&other, named); ok {
		t.Fatalf("a sum never set was found")
	}
}

// TestAppendNameIsHexEncoding: the table spelling is encoding/hex's, for
// every byte value in every position, after any prefix.
func TestAppendNameIsHexEncoding(t *testing.T) {
	for v := range 256 {
		var sum nameSum
		for i := range sum {
			sum[i] = byte(v + 7*i)
		}
		want := NamePrefix + hex.EncodeToString(sum[:])
		if got := sum.name(); got != want {
			t.Fatalf("name = %s, want %s", got, want)
		}
		if got := string(sum.appendName([]byte("x"))); got != "x"+want {
			t.Fatalf("appendName after a prefix = %s", got)
		}
	}
}
