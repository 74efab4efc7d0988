//go:build linux

package salvage

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/internal/lhreplica/lhreplicatest"
)

// The journal as go-common-libs' wal package writes it
// (appendRecordLocked): a 20-byte little-endian header (magic "LHJL",
// version 2, type, payload length, CRC-32C of the first 12 bytes, CRC-32C
// of the payload) and the JSON payload. Its []byte fields (params, args)
// are JSON, which encoding/json writes as base64 strings.
// wal RecordType values.
const (
	walRecBegin    = 1
	walRecIntent   = 2
	walRecStepDone = 3
	walRecCommit   = 4
	walRecPrepare  = 7
)

type (
	walBegin struct {
		TxnID  uint64 `json:"txn_id"`
		Op     string `json:"op"`
		Params []byte `json:"params,omitempty"`
	}
	walIntent struct {
		TxnID  uint64 `json:"txn_id"`
		StepID uint32 `json:"step_id"`
		Action string `json:"action"`
		Args   []byte `json:"args,omitempty"`
	}
	walStepDone struct {
		TxnID  uint64 `json:"txn_id"`
		StepID uint32 `json:"step_id"`
	}
	walEnd struct {
		TxnID uint64 `json:"txn_id"`
	}
	// The step arguments of longhorn-engine pkg/replica/journal_engine.go.
	walCreateHead struct {
		HeadName string     `json:"head_name"`
		Size     int64      `json:"size"`
		Meta     engineDisk `json:"meta"`
	}
	walUpdateVolumeMeta struct {
		Info lhreplicatest.EngineInfo `json:"info"`
	}
	walHeadName struct {
		HeadName string `json:"head_name"`
	}
	walRevertParams struct {
		Parent  string `json:"parent"`
		OldHead string `json:"old_head"`
		NewHead string `json:"new_head"`
		Created string `json:"created"`
	}
)

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// journalAppend appends one record to the replica's journal.log, synced,
// as the wal package does.
func (r *engineReplica) journalAppend(typ uint16, v any) {
	payload := mustJSON(r.t, v)
	tab := crc32.MakeTable(crc32.Castagnoli)
	rec := make([]byte, 20+len(payload))
	binary.LittleEndian.PutUint32(rec[0:], 0x4C484A4C)
	binary.LittleEndian.PutUint16(rec[4:], 2)
	binary.LittleEndian.PutUint16(rec[6:], typ)
	binary.LittleEndian.PutUint32(rec[8:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(rec[12:], crc32.Checksum(rec[0:12], tab))
	binary.LittleEndian.PutUint32(rec[16:], crc32.Checksum(payload, tab))
	copy(rec[20:], payload)
	f, err := os.OpenFile(r.path("journal.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(rec); err != nil {
		r.t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		r.t.Fatal(err)
	}
}

// journalCut says where a journaled operation stopped: after how many of
// its intents, whether PREPARE was written, how many steps were applied,
// how many of those have their STEP_DONE (a crash can fall between a
// step and its record), and whether it was committed.
type journalCut struct {
	intents  int
	prepared bool
	applied  int
	done     int
	commit   bool
}

func (c journalCut) String() string {
	return fmt.Sprintf("intents=%d prepared=%v applied=%d done=%d commit=%v", c.intents, c.prepared, c.applied, c.done, c.commit)
}

// journaledRevert replays the journaled revertDisk to snapshot snap (the
// plan of longhorn-engine's TestRecoveryReplaysRevert and revertPlan in
// journal_crash_matrix_test.go: CREATE_HEAD, UPDATE_VOLUME_META,
// DELETE_OLD_HEAD) up to cut, as transaction txn, and returns the image
// the engine serves after its restart (recoverJournal): the snapshot's
// when PREPARE was written, the volume's as it was otherwise.
func (r *engineReplica) journaledRevert(txn uint64, snap string, cut journalCut) []byte {
	oldHead, newHead := r.info.Head, r.nextHead()
	target := "volume-snap-" + snap + ".img"
	newInfo := r.info
	newInfo.Head, newInfo.Parent = newHead, target
	plan := []walIntent{
		{TxnID: txn, StepID: 1, Action: "CREATE_HEAD", Args: mustJSON(r.t, walCreateHead{HeadName: newHead, Size: r.info.Size, Meta: engineDisk{Name: newHead, Parent: target, Created: "2024-01-02T03:04:07Z"}})},
		{TxnID: txn, StepID: 2, Action: "UPDATE_VOLUME_META", Args: mustJSON(r.t, walUpdateVolumeMeta{Info: newInfo})},
		{TxnID: txn, StepID: 3, Action: "DELETE_OLD_HEAD", Args: mustJSON(r.t, walHeadName{HeadName: oldHead})},
	}
	before, after := slices.Clone(r.image), slices.Clone(r.snapImages[target])
	r.journalAppend(walRecBegin, walBegin{TxnID: txn, Op: "SNAP_REVERT", Params: mustJSON(r.t, walRevertParams{Parent: target, OldHead: oldHead, NewHead: newHead, Created: "2024-01-02T03:04:07Z"})})
	for _, in := range plan[:cut.intents] {
		r.journalAppend(walRecIntent, in)
	}
	if cut.prepared {
		r.journalAppend(walRecPrepare, walEnd{TxnID: txn})
	}
	// Each step is the file operations of the unjournaled revert
	// (revertSteps): CREATE_HEAD the first four, UPDATE_VOLUME_META two,
	// DELETE_OLD_HEAD two.
	r.revert(snap, []int{0, 4, 6, 8}[cut.applied])
	for _, in := range plan[:cut.done] {
		r.journalAppend(walRecStepDone, walStepDone{TxnID: txn, StepID: in.StepID})
	}
	if cut.commit {
		r.journalAppend(walRecCommit, walEnd{TxnID: txn})
	}
	if cut.prepared {
		return after
	}
	return before
}

// TestJournaledRevertCutAtEveryStep cuts a journaled revert at every
// point longhorn-engine's crash matrix does (journal_crash_matrix_test.go
// TestCrashMatrixRevert), and at a step applied without its STEP_DONE:
//
//   - not prepared: the engine discards it; the copy reads as before, and
//     the export agrees;
//   - prepared, volume.meta not yet naming the new head: the engine
//     finishes the revert (the volume then reads the snapshot), the copy
//     read as it is reads the data from before: refused, both named; a
//     forced export reads the data from before;
//   - prepared, volume.meta naming the new head: the export reads the
//     reverted data, as the engine will;
//   - committed: nothing to say.
func TestJournaledRevertCutAtEveryStep(t *testing.T) {
	requireFiemap(t, t.TempDir())
	const size = 32 * blk
	var cuts []journalCut
	for i := 0; i <= 3; i++ {
		cuts = append(cuts, journalCut{intents: i})
	}
	for a := 0; a <= 3; a++ {
		cuts = append(cuts, journalCut{intents: 3, prepared: true, applied: a, done: a})
		if a > 0 {
			cuts = append(cuts, journalCut{intents: 3, prepared: true, applied: a, done: a - 1})
		}
	}
	cuts = append(cuts, journalCut{intents: 3, prepared: true, applied: 3, done: 3, commit: true})
	for _, cut := range cuts {
		t.Run(cut.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "pvc-1-0a1b2c3d")
			r := newEngineReplica(t, dir, size)
			r.write(0, fill('A', 8*blk))
			r.createDisk("s1", size, len(snapshotSteps))
			r.write(2*blk, fill('B', 8*blk))
			r.createDisk("s2", size, len(snapshotSteps))
			r.write(4*blk, fill('C', 8*blk))
			oldHead, newHead := r.info.Head, r.nextHead()
			before := slices.Clone(r.image)
			engine := r.journaledRevert(7, "s1", cut)
			if bytes.Equal(before, r.snapImages["volume-snap-s1.img"]) {
				t.Fatal("the revert changes nothing: the test proves nothing")
			}
			in, err := Inspect(context.Background(), dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			metaNamesNew := cut.applied >= 2
			switch {
			case cut.commit:
				if hasNote(in, "journal.log") || in.Has(ReasonInterruptedRevert) {
					t.Errorf("a committed transaction is named: %q %v", in.Notes, in.ReasonStrings())
				}
			case !cut.prepared:
				if !hasNote(in, "transaction 7 (SNAP_REVERT)", "before it was prepared", "discards it") {
					t.Errorf("the unprepared revert is not named: %q", in.Notes)
				}
			case metaNamesNew:
				if !hasNote(in, "transaction 7 (SNAP_REVERT)", "already names the head", newHead) {
					t.Errorf("the finished volume.meta step is not named: %q", in.Notes)
				}
			default:
				if in.Recoverable || !in.Has(ReasonInterruptedRevert) {
					t.Fatalf("recoverable %v, reasons %v; want interrupted-revert", in.Recoverable, in.ReasonStrings())
				}
				s := strings.Join(in.ReasonStrings(), " ")
				for _, want := range []string{"volume-snap-s1.img", newHead, oldHead, "transaction 7"} {
					if !strings.Contains(s, want) {
						t.Errorf("the reason does not name %s: %s", want, s)
					}
				}
				var buf sliceWriterAt
				_, _, err := Recover(context.Background(), dir, &buf, RecoverOptions{})
				var nr *NotRecoverableError
				if !errors.As(err, &nr) || !errors.Is(err, ErrNotRecoverable) || len(buf.b) != 0 {
					t.Fatalf("Recover: %v, wrote %d bytes", err, len(buf.b))
				}
				if _, _, err := Recover(context.Background(), dir, &buf, RecoverOptions{Force: true}); err != nil {
					t.Fatal(err)
				}
				sameImage(t, "forced export (the data from before the revert)", buf.b[:size], before)
				if bytes.Equal(before, engine) {
					t.Fatal("the engine's state is the one exported")
				}
				return
			}
			if !in.Recoverable {
				t.Fatalf("not recoverable: %v", in.ReasonStrings())
			}
			_, got := inspectAndRecover(t, dir, in.Chain().Layers)
			sameImage(t, "export (what the engine serves after its restart)", got, engine)
		})
	}
}

// TestJournalCutSnapshotAndDamage: a journaled snapshot cut after PREPARE
// reads the same data before and after (a note); a journal damaged in the
// middle is set aside by the engine, which then reads the chain
// volume.meta names (a note); a torn last record, which the engine cuts
// off, is not named; an empty journal (a clean close) neither.
func TestJournalCutSnapshotAndDamage(t *testing.T) {
	requireFiemap(t, t.TempDir())
	const size = 16 * blk
	setup := func(t *testing.T) *engineReplica {
		r := newEngineReplica(t, filepath.Join(t.TempDir(), "pvc-1-0a1b2c3d"), size)
		r.write(0, fill('A', 4*blk))
		return r
	}
	snapshotTxn := func(r *engineReplica) {
		oldHead, newHead := r.info.Head, r.nextHead()
		newInfo := r.info
		newInfo.Head, newInfo.Parent = newHead, "volume-snap-s1.img"
		r.journalAppend(walRecBegin, walBegin{TxnID: 3, Op: "SNAP_CREATE"})
		for i, a := range []struct {
			action string
			args   any
		}{
			{"CREATE_HEAD", walCreateHead{HeadName: newHead, Size: size, Meta: engineDisk{Name: newHead, Parent: "volume-snap-s1.img"}}},
			{"LINK_AS_SNAPSHOT", map[string]string{"source_image": oldHead, "dest_snap": "volume-snap-s1.img"}},
			{"UPDATE_VOLUME_META", walUpdateVolumeMeta{Info: newInfo}},
			{"DELETE_OLD_HEAD", walHeadName{HeadName: oldHead}},
		} {
			r.journalAppend(walRecIntent, walIntent{TxnID: 3, StepID: uint32(i + 1), Action: a.action, Args: mustJSON(r.t, a.args)})
		}
		r.journalAppend(walRecPrepare, walEnd{TxnID: 3})
		r.createDisk("s1", size, 6) // the new head and the snapshot's link, not volume.meta
		r.journalAppend(walRecStepDone, walStepDone{TxnID: 3, StepID: 1})
	}

	t.Run("snapshot prepared, cut before volume.meta", func(t *testing.T) {
		r := setup(t)
		snapshotTxn(r)
		in, got := inspectAndRecover(t, r.dir, r.chain())
		sameImage(t, "export", got, r.image)
		if !hasNote(in, "transaction 3 (SNAP_CREATE)", "changes no block") {
			t.Errorf("the cut snapshot is not named: %q", in.Notes)
		}
	})
	t.Run("damaged in the middle", func(t *testing.T) {
		r := setup(t)
		r.write(4*blk, fill('B', blk))
		r.createDisk("s0", size, len(snapshotSteps))
		r.journaledRevert(5, "s0", journalCut{intents: 3, prepared: true})
		data, err := os.ReadFile(r.path("journal.log"))
		if err != nil {
			t.Fatal(err)
		}
		data[30] ^= 0xff // inside the first record's payload
		if err := os.WriteFile(r.path("journal.log"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		in, got := inspectAndRecover(t, r.dir, r.chain())
		sameImage(t, "export", got, r.image)
		if !hasNote(in, "journal.log is damaged at byte 0", "bad payload checksum", "sets such a journal aside") {
			t.Errorf("the damaged journal is not named: %q", in.Notes)
		}
	})
	t.Run("torn last record", func(t *testing.T) {
		r := setup(t)
		r.write(4*blk, fill('B', blk))
		r.createDisk("s0", size, len(snapshotSteps))
		r.journaledRevert(5, "s0", journalCut{intents: 3, prepared: true})
		data, err := os.ReadFile(r.path("journal.log"))
		if err != nil {
			t.Fatal(err)
		}
		// The PREPARE record lost its last bytes: the engine cuts it off,
		// the revert was never prepared.
		if err := os.WriteFile(r.path("journal.log"), data[:len(data)-3], 0o600); err != nil {
			t.Fatal(err)
		}
		in, got := inspectAndRecover(t, r.dir, r.chain())
		sameImage(t, "export", got, r.image)
		if !hasNote(in, "transaction 5 (SNAP_REVERT)", "before it was prepared") {
			t.Errorf("the torn journal is not read up to its tear: %q", in.Notes)
		}
	})
	t.Run("removal prepared", func(t *testing.T) {
		r := setup(t)
		r.createDisk("s0", size, len(snapshotSteps))
		r.journalAppend(walRecBegin, walBegin{TxnID: 4, Op: "SNAP_REMOVE"})
		r.journalAppend(walRecIntent, walIntent{TxnID: 4, StepID: 1, Action: "RM_DISK", Args: mustJSON(t, map[string]string{"name": "volume-snap-gone.img"})})
		r.journalAppend(walRecPrepare, walEnd{TxnID: 4})
		in, _ := inspectAndRecover(t, r.dir, r.chain())
		if !hasNote(in, "transaction 4 (SNAP_REMOVE)", "leaves the head") {
			t.Errorf("the cut removal is not named: %q", in.Notes)
		}
	})
	t.Run("revert whose volume.meta step names no head", func(t *testing.T) {
		r := setup(t)
		r.journalAppend(walRecBegin, walBegin{TxnID: 6, Op: "SNAP_REVERT"})
		r.journalAppend(walRecIntent, walIntent{TxnID: 6, StepID: 1, Action: "UPDATE_VOLUME_META", Args: []byte(`{"info":{}}`)})
		r.journalAppend(walRecPrepare, walEnd{TxnID: 6})
		in, err := Inspect(context.Background(), r.dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if in.Recoverable || !in.Has(ReasonInterruptedRevert) || !strings.Contains(strings.Join(in.ReasonStrings(), " "), "cannot be told") {
			t.Fatalf("recoverable %v, reasons %v; want interrupted-revert", in.Recoverable, in.ReasonStrings())
		}
	})
	t.Run("too large to read", func(t *testing.T) {
		r := setup(t)
		if err := os.WriteFile(r.path("journal.log"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(r.path("journal.log"), 17<<20); err != nil {
			t.Fatal(err)
		}
		in, err := Inspect(context.Background(), r.dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if in.Recoverable || !in.Has(ReasonInterruptedRevert) || !strings.Contains(strings.Join(in.ReasonStrings(), " "), "not read") {
			t.Fatalf("recoverable %v, reasons %v; want interrupted-revert, not read", in.Recoverable, in.ReasonStrings())
		}
	})
	t.Run("not a regular file", func(t *testing.T) {
		r := setup(t)
		if err := os.Mkdir(r.path("journal.log"), 0o700); err != nil {
			t.Fatal(err)
		}
		in, _ := inspectAndRecover(t, r.dir, r.chain())
		if !hasNote(in, "journal.log is a directory", "sets such a journal aside") {
			t.Errorf("the journal that is a directory is not named: %q", in.Notes)
		}
	})
	t.Run("empty", func(t *testing.T) {
		r := setup(t)
		if err := os.WriteFile(r.path("journal.log"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		in, _ := inspectAndRecover(t, r.dir, r.chain())
		if hasNote(in, "journal.log") {
			t.Errorf("an empty journal is named: %q", in.Notes)
		}
	})
}
