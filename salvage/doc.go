// Package salvage inspects, ranks and exports what an orphaned Longhorn v1
// replica directory holds, read-only: it tells whether a volume's data can
// be recovered from it, which of a volume's leftover copies is the best,
// and rebuilds the volume's raw image from it exactly as the engine reads
// it.
//
// It answers the question a user with a faulted volume and no backup asks
// (longhorn/longhorn#7482, #7735, #9972): which of the replica directories
// left on my disks still holds my data, and which is the freshest?
//
// # In short
//
//	in, err := salvage.Inspect(ctx, "/var/lib/longhorn/replicas/pvc-1-0a1b2c3d", salvage.Options{})
//	// in.Recoverable, in.Reasons (each with a kind a program can test), in.Backing
//	ranks := salvage.Rank(inspections) // 1 = the best recoverable copy of its volume
//	in, res, err := salvage.Recover(ctx, bestDir, outFile, salvage.RecoverOptions{})
//	// res.SHA256 is the image's; nothing on the disk was changed
//
// For the orphan core, salvage.WithCopies(adapter, salvage.Options{})
// wraps diskscan's adapter so that each orphaned directory's record says
// whether it is a copy of its volume's data, which the last-copy guard
// reads. examples/longhorn-salvage is the command for a person.
//
// # Use
//
//  1. Inspect each candidate directory (<disk>/replicas/<volume>-<8>) on
//     every disk of every node: Inspect returns an Inspection with the
//     chain, the layers, the revision counter, the flags, and a verdict
//     (Recoverable, or not with every Reason and what to do about it,
//     ReasonKind.Remedy), and whether the directory is proven to hold
//     none of the volume's data (NoData).
//  2. Rank the inspections of a volume (Rank groups them by volume): 1 is
//     the best recoverable copy, 0 a copy that is not recoverable.
//  3. Export the best copy with Recover, which inspects again at the
//     moment it acts, refuses a copy that is not recoverable (unless
//     forced), and writes the image through ExportChain.
//
// For the orphan core, CopyInventory (or WithCopies around diskscan's
// adapter) fills each orphaned replica directory's orphan.Item.Copy, so
// the records say whether an orphan is a recoverable copy of its volume,
// and the last-copy guard keeps every copy of a volume that needs it
// unless the copy is proven to hold no data.
//
// # Holding data is not the same as being recoverable
//
// Recoverable says the export can read the copy today. A copy that is not
// recoverable usually still holds the user's writes: its backing image
// was removed from the disk (Longhorn removes a disk's unused copy of a
// backing image after its backing-image-cleanup-wait-interval setting)
// or is qcow2, its volume.meta is lost or damaged
// while every layer is intact, a rebuild into it did not finish. A person
// or Longhorn can still recover such data, so it must not be deleted as
// if it were empty. Inspection.NoData is set only when it is proven that
// the directory holds none of the volume's data: volume.meta was read and
// names no backing image, the directory was listed to its end, and every
// file but the engine's metadata (volume.meta, revision.counter, each
// layer's .meta and .checksum, and their .tmp) is a regular file that is
// empty or has no block allocated and in which lseek(SEEK_DATA) finds no
// data. Whatever cannot be examined (a link, a subdirectory, a FIFO, a
// missing volume.meta, a platform without SEEK_DATA) is taken as holding
// data.
// The command examples/longhorn-salvage does all of this for a person.
//
// # The format, and where caretaker refuses what the engine does
//
// A replica directory holds volume.meta (JSON; the keys changed across
// releases: v0.1.0 Size, Head, Dirty, Rebuilding, Parent, SectorSize;
// BackingFileName from v0.2.0; Error in v1.1.0; BackingFilePath from
// v1.1.1; Encrypted from v1.12), one image per layer (volume-head-NNN.img,
// volume-snap-<name>.img, sparse) with a JSON <image>.meta naming its
// Parent, and revision.counter when the counter is enabled
// (longhorn-engine pkg/replica/replica.go, types Info and disk;
// revision_counter.go). The engine's read-only open (NewReadOnly) is not
// safe on a damaged directory, so Inspect refuses instead where it:
//
//   - creates a missing layer image empty and reads older data through it
//     (openFile with create-on-failure): ReasonMissingLayer;
//   - loops forever on a Parent cycle (Chain has no cycle check):
//     ReasonCyclicChain;
//   - follows a symbolic link in place of a layer: ReasonNotRegular;
//   - reads older data past the end of a head shorter than the volume:
//     ReasonShortHead;
//   - ignores Rebuilding (a crashed rebuild leaves snapshots missing or
//     half-copied under their final names, pkg/sync/sync.go):
//     ReasonRebuilding.
//
// volume.meta is read strictly, by the same rules diskscan's scan uses
// (one parser serves both): a file the engine's decoder (encoding/json
// into Info) and a careful reader would read differently is corrupt
// (ReasonVolumeMeta): a key twice, a key that names a field only without
// regard to case, both BackingFileName and BackingFilePath, a Head that
// is a path. On top of the format, the inspection's policy refuses Size 0
// and a missing Head (nothing to read by the engine's rules), and an
// empty volume.meta (ErrEmptyVolumeMeta: the engine's writable open
// rewrites it from the size it is started with and the first head in name
// order, tryRecoverVolumeMetaFile; a copy on its own has no size, so
// nothing is guessed), and the scan refuses the same, so a directory the scan reports as a replica is
// never one whose metadata Inspect calls corrupt. Inspection.Volume is
// the volume by Longhorn's directory name rule (orphan.VolumeOfDataName),
// or, for a name not of that form, the whole name (so Rank never ranks
// copies of different volumes together); CopyInventory gives the
// last-copy guard the rule's answer, "" (unknown), for such a name.
//
// Backing images. A backing image is read as the engine reads it, raw or
// qcow2 (longhorn-engine's backingfile package opens a qcow2 one through
// QEMU's format): salvage decodes qcow2 versions 2 and 3 itself (L1 and
// L2 tables, unallocated and zero clusters, zlib-compressed clusters;
// QEMU's docs/interop/qcow2.txt) and refuses, saying which, a qcow2 file
// Longhorn does not make (one with a backing file of its own, encrypted,
// with an external data file or extended L2 entries, zstd-compressed, or
// marked corrupt by QEMU). A copy whose disk lost its backing image can
// be given the same image from elsewhere (Options.BackingFile), checked
// against the backing image manager's backing.cfg beside it.
//
// Sizes. A Size that is not a multiple of 512 bytes is refused
// (ReasonVolumeMeta): the engine refuses to open such a replica
// (replica.go construct) and Longhorn never makes one (longhorn-manager
// util.RoundUpSize). A Size of whole 512-byte sectors but not of whole
// 4096-byte blocks, which the engine run by hand accepts, is exported at
// exactly Size bytes with a note: its last, partial block can be neither
// read nor written through the engine (diffDisk.read, readModifyWrite),
// and is taken from the head, as the engine's read-only open does.
//
// An operation cut short. The engine makes a snapshot (createDisk), an
// expansion (the same, with the new size) or a revert (revertDisk) one
// file at a time, and at every step volume.meta names a complete chain:
// the old one until it is rewritten, the new one after. The engine,
// restarted, reads that chain and ignores the rest; so does the export.
// What the cut left beside it (a new head without its .meta or outside
// the chain, a snapshot image without its .meta, an old head's .meta
// without its image) is named in the notes. A volume.meta left empty by a
// power loss, with two heads present, is refused and both heads are
// named. Newer engines keep a journal (journal.log, go-common-libs' wal
// format: CRC-framed JSON records of each operation's planned steps) and,
// on restart, before reading, drop an operation cut before it was
// prepared and finish one cut after (pkg/replica/journal_engine.go
// recoverJournal). Inspect reads the journal the same way. A snapshot or
// a removal so finished reads the same data as the chain volume.meta
// names, and a revert whose volume.meta step was done reads what the
// engine will: notes. A revert prepared and cut before volume.meta named
// its new head is the one case where the engine, restarted, serves other
// data (the snapshot's) than the copy read as it is (the data from before
// the revert): ReasonInterruptedRevert, naming both; a forced export reads
// the data from before the revert. A journal damaged in the middle, which
// the engine sets aside, is a note.
// A replica rebuilt by the sync agent (its snapshots sent as sparse files
// in any order, its .meta files re-encoded, its head numbered on its own)
// reads like its source once volume.meta no longer says Rebuilding.
//
// Deviations, each the safer choice: a copy whose revision.counter does
// not parse stays recoverable (the data does not depend on it; the engine
// would fail a counter-enabled open) and is ranked without a counter; an
// encrypted copy (v1.12+) is recoverable and its export is the LUKS2
// ciphertext (Inspection.Encrypted); the backing image is looked for
// under the copy's own disk, since volume.meta records the
// instance-manager container's /host/... path; off-chain snapshots and
// unparsable .meta files outside the chain, which make the engine's open
// fail (readMetadata), are noted, not reasons. A revision.counter left
// from before the counter was disabled (the engine then neither updates
// nor reads it) cannot be told from a live one; when every copy of a
// volume has one, Rank trusts it.
//
// # Safety
//
// Inspect never writes, never follows a symbolic link (the replica
// directory itself included: it is lstat'ed, then opened as an os.Root
// and checked to be the same directory), never reads a layer image (it is
// lstat'ed; one that lstat says has no block allocated is opened
// read-only for the SEEK_DATA probe of NoData, and nothing is read from
// it), and opens files only after lstat says they are regular files,
// non-blocking, checking the open file is the one lstat saw: a FIFO,
// socket or device is never opened. Every meta file is read with a
// bound (Options.MaxMetaSize). ctx is checked between files.
//
// What is checked is what is read: the Chain an inspection returns
// remembers each layer and the backing file as Inspect saw them (device,
// inode, size, modification time), and the export, which opens them again
// by name, refuses one replaced or changed in between (ErrExportChanged),
// then checks again after reading that none changed while it was read.
//
// # Errors
//
// What is wrong inside a directory is a Reason, not an error. Inspect
// returns ctx's error, or one reaching the directory itself (a missing
// directory wraps fs.ErrNotExist). Parse errors are *MetaError wrapping
// ErrCorrupt; Recover's refusal is a *NotRecoverableError wrapping
// ErrNotRecoverable.
//
// # Concurrency
//
// Inspect, Rank and Recover keep no state: call them from any number of
// goroutines. An Inspection is not modified after Inspect returns.
package salvage
