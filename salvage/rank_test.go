package salvage_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/salvage"
	"github.com/caretaker-storage/caretaker/salvage/salvagetest"
)

// candidate describes one replica directory of a ranking test.
type candidate struct {
	name       string
	disk       int // which of two disks
	counter    bool
	revision   int64
	headBlocks int64         // blocks written in the head
	age        time.Duration // the head's mtime, before the base time
	rebuilding bool
	want       int
}

func runRanking(t *testing.T, cands []candidate, wantBasis salvage.Basis) {
	t.Helper()
	disks := []string{newDisk(t), newDisk(t)}
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	var ins []*salvage.Inspection
	for _, c := range cands {
		r := salvagetest.Replica{Size: 4 * salvagetest.BlockSize * 16, Counter: c.counter, Revision: c.revision, Rebuilding: c.rebuilding,
			Snapshots: []salvagetest.Layer{{Writes: []salvagetest.Write{salvagetest.Block(0, 1)}}}}
		for b := range c.headBlocks {
			r.Head.Writes = append(r.Head.Writes, salvagetest.Block(b, 2))
		}
		dir := write(t, disks[c.disk], c.name, r)
		if err := os.Chtimes(filepath.Join(dir, r.HeadName()), base, base.Add(-c.age)); err != nil {
			t.Fatal(err)
		}
		ins = append(ins, inspect(t, dir, salvage.Options{}))
	}
	before := [2]map[string]string{snapshot(t, disks[0]), snapshot(t, disks[1])}
	// The ranking must not depend on the order of the candidates.
	for round := range 5 {
		perm := rand.Perm(len(ins))
		shuffled := make([]*salvage.Inspection, len(ins))
		for i, p := range perm {
			shuffled[i] = ins[p]
		}
		got := salvage.Rank(shuffled)
		for i, p := range perm {
			c := cands[p]
			if got[i].Rank != c.want {
				t.Errorf("round %d: %s ranked %d, want %d (reasons %v)", round, c.name, got[i].Rank, c.want, ins[p].ReasonStrings())
			}
			if c.want > 0 && got[i].Basis != wantBasis {
				t.Errorf("%s: basis %s, want %s", c.name, got[i].Basis, wantBasis)
			}
		}
	}
	for i, d := range disks {
		if !equalSnapshots(before[i], snapshot(t, d)) {
			t.Errorf("ranking changed disk %d", i)
		}
	}
}

func TestRankByRevisionCounter(t *testing.T) {
	runRanking(t, []candidate{
		{name: "vol-a-00000001", disk: 0, counter: true, revision: 1200, headBlocks: 9, want: 2},
		{name: "vol-a-00000002", disk: 1, counter: true, revision: 1500, headBlocks: 1, age: time.Hour, want: 1},
		// The highest counter, but rebuilding: never above a recoverable
		// copy.
		{name: "vol-a-00000003", disk: 1, counter: true, revision: 9000, headBlocks: 12, rebuilding: true, want: 0},
		// Another volume is ranked on its own.
		{name: "vol-b-00000001", disk: 0, counter: true, revision: 3, want: 1},
	}, salvage.BasisRevisionCounter)
}

func TestRankWithoutCounterFollowsTheEngineSalvageRule(t *testing.T) {
	runRanking(t, []candidate{
		// Within 5 s of the newest head: the largest allocated head wins,
		// even though it is 3 s older.
		{name: "vol-a-00000001", disk: 0, headBlocks: 4, want: 2},
		{name: "vol-a-00000002", disk: 1, headBlocks: 8, age: 3 * time.Second, want: 1},
		// Larger still, but older than the window: after both.
		{name: "vol-a-00000003", disk: 1, headBlocks: 14, age: time.Minute, want: 3},
		{name: "vol-a-00000004", disk: 0, headBlocks: 15, rebuilding: true, want: 0},
	}, salvage.BasisHeadFile)
}

func TestRankMixedCountersFallBackToTheHeadRule(t *testing.T) {
	runRanking(t, []candidate{
		{name: "vol-a-00000001", disk: 0, counter: true, revision: 99999, headBlocks: 1, age: time.Hour, want: 2},
		{name: "vol-a-00000002", disk: 1, headBlocks: 2, want: 1},
	}, salvage.BasisHeadFile)
}

func TestRankTiesAreDeterministic(t *testing.T) {
	runRanking(t, []candidate{
		{name: "vol-a-00000002", disk: 1, counter: true, revision: 7, headBlocks: 3, want: 2},
		{name: "vol-a-00000001", disk: 1, counter: true, revision: 7, headBlocks: 3, want: 1},
	}, salvage.BasisRevisionCounter)
}
