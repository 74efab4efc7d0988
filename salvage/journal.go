package salvage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"slices"
	"strings"

	"github.com/caretaker-storage/caretaker/internal/bounded"
	"github.com/caretaker-storage/caretaker/internal/safefile"
)

// The engine's journal of snapshot operations (longhorn-engine
// pkg/replica/journal_engine.go, over go-common-libs' wal package): a file
// journal.log in the replica directory holding records, each a 20-byte
// header (magic "LHJL" as a little-endian uint32, version 2, record type,
// payload length, a CRC-32C of the first 12 bytes, a CRC-32C of the
// payload) and a JSON payload. A clean close truncates it to nothing.
const (
	journalMagic      = 0x4C484A4C
	journalVersion    = 2
	journalHeaderSize = 20
	// journalMaxPayload is the wal package's own cap on a record.
	journalMaxPayload = 1 << 20
	// maxJournalSize bounds the journal read. Real records are a few
	// hundred bytes and the engine empties the file at every clean close.
	maxJournalSize = 16 << 20
)

// The journal's record types (wal RecordType; stable on disk).
const (
	recTxnBegin   = 1
	recIntent     = 2
	recStepDone   = 3
	recTxnCommit  = 4
	recTxnAbort   = 5
	recCheckpoint = 6
	recTxnPrepare = 7
)

var journalCRC = crc32.MakeTable(crc32.Castagnoli)

// journalRecord is one complete record.
type journalRecord struct {
	typ     uint16
	payload []byte
}

// journalCorrupt says where and why a journal stops being readable in the
// middle (not at a torn tail).
type journalCorrupt struct {
	off    int
	detail string
}

// readJournalRecords parses the records of data. A short record at the
// very end (a write cut by the crash) ends the journal as the engine's
// Open does (it truncates such a tail); any other damage is returned as
// corrupt, with the records before it.
func readJournalRecords(data []byte) ([]journalRecord, *journalCorrupt) {
	var recs []journalRecord
	for off := 0; off < len(data); {
		if len(data)-off < journalHeaderSize {
			return recs, nil // torn header
		}
		h := data[off : off+journalHeaderSize]
		if m := binary.LittleEndian.Uint32(h[0:4]); m != journalMagic {
			return recs, &journalCorrupt{off, fmt.Sprintf("bad magic 0x%08x", m)}
		}
		if v := binary.LittleEndian.Uint16(h[4:6]); v != journalVersion {
			return recs, &journalCorrupt{off, fmt.Sprintf("version %d, not %d", v, journalVersion)}
		}
		if crc32.Checksum(h[0:12], journalCRC) != binary.LittleEndian.Uint32(h[12:16]) {
			return recs, &journalCorrupt{off, "bad header checksum"}
		}
		n := binary.LittleEndian.Uint32(h[8:12])
		if n > journalMaxPayload {
			return recs, &journalCorrupt{off, fmt.Sprintf("payload of %d bytes", n)}
		}
		if int64(len(data)-off-journalHeaderSize) < int64(n) {
			return recs, nil // torn payload
		}
		p := data[off+journalHeaderSize : off+journalHeaderSize+int(n)]
		if crc32.Checksum(p, journalCRC) != binary.LittleEndian.Uint32(h[16:20]) {
			return recs, &journalCorrupt{off, "bad payload checksum"}
		}
		recs = append(recs, journalRecord{typ: binary.LittleEndian.Uint16(h[6:8]), payload: p})
		off += journalHeaderSize + int(n)
	}
	return recs, nil
}

// journalTxn is one transaction of the journal as its records tell it.
type journalTxn struct {
	id       uint64
	op       string
	intents  []journalIntent
	prepared bool
	done     map[uint32]bool
	ended    bool // committed or aborted
}

// journalIntent is one planned step: an action and its arguments.
type journalIntent struct {
	step   uint32
	action string
	args   []byte
}

// The payloads, as the wal package encodes them (its []byte fields are
// JSON base64 strings holding JSON).
type (
	journalBegin struct {
		TxnID uint64 `json:"txn_id"`
		Op    string `json:"op"`
	}
	journalIntentPayload struct {
		TxnID  uint64 `json:"txn_id"`
		StepID uint32 `json:"step_id"`
		Action string `json:"action"`
		Args   []byte `json:"args"`
	}
	journalStep struct {
		TxnID  uint64 `json:"txn_id"`
		StepID uint32 `json:"step_id"`
	}
)

// analyzeJournal groups the records into transactions, in the order they
// began, and lists what breaks the journal's rules (the wal package's
// Analyze refuses such a journal, and the engine's open then fails).
func analyzeJournal(recs []journalRecord) (txns []*journalTxn, broken []string) {
	byID := map[uint64]*journalTxn{}
	get := func(id uint64, what string) *journalTxn {
		t := byID[id]
		if t == nil {
			broken = append(broken, fmt.Sprintf("%s of transaction %d, which never began", what, id))
		}
		return t
	}
	for _, r := range recs {
		switch r.typ {
		case recTxnBegin:
			var p journalBegin
			if err := json.Unmarshal(r.payload, &p); err != nil {
				broken = append(broken, "a TXN_BEGIN that is not JSON")
				continue
			}
			if byID[p.TxnID] != nil {
				broken = append(broken, fmt.Sprintf("transaction %d begins twice", p.TxnID))
				continue
			}
			t := &journalTxn{id: p.TxnID, op: p.Op, done: map[uint32]bool{}}
			byID[p.TxnID] = t
			txns = append(txns, t)
		case recIntent:
			var p journalIntentPayload
			if err := json.Unmarshal(r.payload, &p); err != nil {
				broken = append(broken, "an INTENT that is not JSON")
				continue
			}
			if t := get(p.TxnID, "an INTENT"); t != nil {
				if t.prepared || t.ended {
					broken = append(broken, fmt.Sprintf("an INTENT of transaction %d after it was prepared or ended", p.TxnID))
				}
				t.intents = append(t.intents, journalIntent{step: p.StepID, action: p.Action, args: p.Args})
			}
		case recStepDone:
			var p journalStep
			if err := json.Unmarshal(r.payload, &p); err != nil {
				broken = append(broken, "a STEP_DONE that is not JSON")
				continue
			}
			if t := get(p.TxnID, "a STEP_DONE"); t != nil {
				t.done[p.StepID] = true
			}
		case recTxnPrepare, recTxnCommit, recTxnAbort:
			var p journalStep
			if err := json.Unmarshal(r.payload, &p); err != nil {
				broken = append(broken, "an end record that is not JSON")
				continue
			}
			t := get(p.TxnID, "a PREPARE, COMMIT or ABORT")
			switch {
			case t == nil:
			case r.typ == recTxnPrepare:
				t.prepared = true
			default:
				t.ended = true
			}
		case recCheckpoint:
		default:
			broken = append(broken, fmt.Sprintf("a record of unknown type %d", r.typ))
		}
	}
	return txns, broken
}

// newHead returns the head a transaction's UPDATE_VOLUME_META step writes
// into volume.meta: has says it has such a step, ok that its arguments
// name a head.
func (t *journalTxn) newHead() (head string, has, ok bool) {
	for _, in := range t.intents {
		if in.action != "UPDATE_VOLUME_META" {
			continue
		}
		var a struct {
			Info struct {
				Head string
			} `json:"info"`
		}
		if err := json.Unmarshal(in.args, &a); err != nil || a.Info.Head == "" {
			return "", true, false
		}
		return a.Info.Head, true, true
	}
	return "", false, false
}

// oldHead returns the head a transaction's DELETE_OLD_HEAD step removes.
func (t *journalTxn) oldHead() string {
	for _, in := range t.intents {
		if in.action != "DELETE_OLD_HEAD" {
			continue
		}
		var a struct {
			HeadName string `json:"head_name"`
		}
		if json.Unmarshal(in.args, &a) == nil {
			return a.HeadName
		}
	}
	return ""
}

// target returns the parent a transaction's CREATE_HEAD gives its new
// head: for a revert, the snapshot reverted to.
func (t *journalTxn) target() string {
	for _, in := range t.intents {
		if in.action != "CREATE_HEAD" {
			continue
		}
		var a struct {
			Meta struct {
				Parent string
			} `json:"meta"`
		}
		if json.Unmarshal(in.args, &a) == nil {
			return a.Meta.Parent
		}
	}
	return ""
}

// stepsDone says how many of the planned steps have a STEP_DONE.
func (t *journalTxn) stepsDone() string {
	n := 0
	for _, in := range t.intents {
		if t.done[in.step] {
			n++
		}
	}
	return fmt.Sprintf("%d of %d steps recorded done", n, len(t.intents))
}

// journalSteps are the actions the engine's recovery knows
// (journal_engine.go stepRegistry); a prepared transaction with another
// makes its open fail.
var journalSteps = []string{"CREATE_HEAD", "LINK_AS_SNAPSHOT", "UPDATE_VOLUME_META", "UPDATE_SNAP_META", "DELETE_OLD_HEAD", "RM_DISK"}

// journal reads journal.log and judges what a cut operation it records
// means for the export.
//
// The engine, opening the directory writable (construct → recoverJournal
// in pkg/replica/journal_engine.go), replays the journal before it reads
// volume.meta: a transaction that was not prepared is aborted (none of
// its steps ran: the engine prepares before the first one), and a
// prepared one is rolled forward, its remaining steps applied, whatever
// volume.meta says now. A revert (revertDisk: CREATE_HEAD of an empty
// head over the snapshot, UPDATE_VOLUME_META naming it, DELETE_OLD_HEAD)
// cut after PREPARE but before volume.meta names the new head is the one
// case where the chain volume.meta names now is not what the engine will
// serve: the engine finishes the revert and the volume then reads the
// snapshot, dropping the writes made after it, while this directory,
// read as it is, still holds them. Which of the two the user wants is
// not for salvage to guess: the copy is refused
// (ReasonInterruptedRevert) and both are named. Once volume.meta names
// the new head, the export reads what the engine will. A snapshot cut
// the same way reads the same data before and after (a snapshot changes
// no block), and so does a snapshot removal: they are notes.
//
// A journal damaged in the middle is set aside by the engine
// (wal.OpenWithQuarantine) and the chain volume.meta names is read, as
// the export does: a note. A journal too large to read here could hold
// anything: refused.
func (s *inspector) journal() error {
	in := s.in
	data, _, err := readBounded(s.root, engineJournalFile, maxJournalSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, bounded.ErrTooLarge):
		in.reason(ReasonInterruptedRevert, engineJournalFile, "larger than %d bytes, not read: it may hold a revert the engine would finish on restart", maxJournalSize)
		return nil
	case errors.Is(err, safefile.ErrNotRegular):
		in.note("%s is %s: the engine sets such a journal aside (wal.OpenWithQuarantine) and reads the chain volume.meta names, as the export does", engineJournalFile, describe(err))
		return nil
	case err != nil:
		return err
	case len(data) == 0:
		return nil
	}
	recs, corrupt := readJournalRecords(data)
	if corrupt != nil {
		in.note("%s is damaged at byte %d (%s): the engine sets such a journal aside (wal.OpenWithQuarantine) and replays none of it, reading the chain volume.meta names, as the export does", engineJournalFile, corrupt.off, corrupt.detail)
		return nil
	}
	txns, broken := analyzeJournal(recs)
	if len(broken) > 0 {
		in.note("%s breaks the journal's rules (%s): the engine's open fails on it (recoverJournal)", engineJournalFile, strings.Join(broken, "; "))
	}
	for _, t := range txns {
		if t.ended {
			continue
		}
		what := fmt.Sprintf("%s holds transaction %d (%s), cut", engineJournalFile, t.id, t.op)
		if !t.prepared {
			in.note("%s before it was prepared: the engine discards it on restart, none of its steps having run, and reads the chain volume.meta names, as the export does", what)
			continue
		}
		for _, a := range t.intents {
			if !slices.Contains(journalSteps, a.action) {
				in.note("%s: its step %d is %s, which the engine's recovery does not know: its open fails", what, a.step, a.action)
			}
		}
		head, has, ok := t.newHead()
		switch {
		case !has:
			in.note("%s after it was prepared (%s); the engine finishes it on restart, and it leaves the head volume.meta names (%s) as it is: a snapshot removal drops a snapshot whose data was merged first, so the export, reading the chain volume.meta names, reads the same data", what, t.stepsDone(), in.Meta.Head)
		case ok && head == in.Meta.Head:
			in.note("%s after it was prepared (%s); the engine finishes it on restart, and volume.meta already names the head it ends with (%s): the export reads what the engine will", what, t.stepsDone(), in.Meta.Head)
		case t.op == "SNAP_CREATE":
			in.note("%s after it was prepared (%s), before volume.meta named its new head; the engine finishes it on restart: a snapshot changes no block, so the export, reading head %s, reads the same data", what, t.stepsDone(), in.Meta.Head)
		case ok && t.op == "SNAP_REVERT" && t.oldHead() == in.Meta.Head && t.target() != "":
			target := t.target()
			in.reason(ReasonInterruptedRevert, engineJournalFile, "a revert to %s (transaction %d, %s) was prepared, then cut before volume.meta named its new head %s: the engine, restarted, finishes it and the volume then reads %s, without the writes made since; read as it is, this copy still has them (head %s)", target, t.id, t.stepsDone(), head, target, in.Meta.Head)
		case ok:
			in.reason(ReasonInterruptedRevert, engineJournalFile, "transaction %d (%s, %s) was prepared, then cut before volume.meta named its new head %s (it names %s): the engine, restarted, finishes it and reads another chain than this copy names now", t.id, t.op, t.stepsDone(), head, in.Meta.Head)
		default:
			in.reason(ReasonInterruptedRevert, engineJournalFile, "transaction %d (%s, %s) was prepared and rewrites volume.meta, but its step does not say with what head: the engine, restarted, finishes it, and which chain it then reads cannot be told", t.id, t.op, t.stepsDone())
		}
	}
	return nil
}
