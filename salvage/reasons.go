package salvage

// ReasonKind classifies why a replica directory is not recoverable.
type ReasonKind string

// The reasons a replica directory is not recoverable. Each is a case where
// reading it back would give wrong data, or where longhorn-engine's own
// read-only open (pkg/replica/replica.go NewReadOnly) would do something
// unsafe; caretaker refuses instead.
const (
	// ReasonNotDirectory: the replica path is a symbolic link, a file or
	// another non-directory. It is never followed.
	ReasonNotDirectory ReasonKind = "not-a-directory"
	// ReasonVolumeMeta: volume.meta is missing, empty, oversized, not a
	// regular file, or not what any release writes, or its Size is not a
	// multiple of 512 bytes (the engine refuses to open such a replica).
	ReasonVolumeMeta ReasonKind = "volume-meta"
	// ReasonErrorState: volume.meta records an error (Error is set when the
	// replica failed to stat its own files).
	ReasonErrorState ReasonKind = "error-state"
	// ReasonRebuilding: volume.meta says Rebuilding: a rebuild into this
	// replica did not finish, so its snapshots may be missing or partly
	// copied (longhorn-engine pkg/sync/sync.go copies them under their
	// final names). The engine's read-only open does not check the flag.
	ReasonRebuilding ReasonKind = "rebuilding"
	// ReasonBrokenChain: a layer of the chain has no .meta. The engine
	// fails the open ("failed to find metadata for ...").
	ReasonBrokenChain ReasonKind = "broken-chain"
	// ReasonLayerMeta: a chain layer's .meta is oversized, not a regular
	// file, or does not parse.
	ReasonLayerMeta ReasonKind = "layer-meta"
	// ReasonCyclicChain: following Parent comes back to a layer already in
	// the chain. The engine's Chain() has no cycle check and loops,
	// growing memory, until it dies.
	ReasonCyclicChain ReasonKind = "cyclic-chain"
	// ReasonChainTooLong: the chain is longer than the engine accepts (250
	// layers, types.MaximumTotalSnapshotCount, checked in openLiveChain).
	ReasonChainTooLong ReasonKind = "chain-too-long"
	// ReasonMissingLayer: a chain layer's .meta exists but its image file
	// does not. The engine's open creates it empty (openFile with
	// create-on-failure, also read-only) and reads older data through it.
	ReasonMissingLayer ReasonKind = "missing-layer"
	// ReasonNotRegular: a symbolic link, FIFO, socket, device or directory
	// where a layer image (or its .meta) should be. The engine follows
	// links; caretaker never opens it.
	ReasonNotRegular ReasonKind = "not-regular-file"
	// ReasonShortHead: the head image is shorter than the volume. The
	// engine reads lower layers past its end, so the blocks there would be
	// older data, silently.
	ReasonShortHead ReasonKind = "short-head"
	// ReasonMissingBackingImage: volume.meta names a backing image that is
	// not found as a regular file under the replica's own disk. Without it
	// the engine reads zeros where the base image had data.
	ReasonMissingBackingImage ReasonKind = "missing-backing-image"
	// ReasonBackingImageFormat: the backing image is a qcow2 image the
	// export cannot read (a kind Longhorn does not make, such as one with
	// a backing file of its own, or a damaged one); the message says which.
	// Raw images and plain qcow2 images, compressed or not, are read.
	ReasonBackingImageFormat ReasonKind = "backing-image-format"
	// ReasonBackingImageMismatch: the backing file given in place of the
	// one the copy's disk lacks does not match what the files record of
	// the image the copy expects (its size, name, UUID or checksum); the
	// message says what differs.
	ReasonBackingImageMismatch ReasonKind = "backing-image-mismatch"
	// ReasonInterruptedRevert: the engine's journal (journal.log, Longhorn
	// releases that journal snapshot operations) holds a revert that was
	// prepared and then cut before volume.meta named its new head. The
	// engine, restarted, finishes the revert, and the volume then reads
	// the snapshot; this copy, read as it is, still reads the data from
	// before the revert. A journal too large to read, which could hold
	// such a revert, is this reason too.
	ReasonInterruptedRevert ReasonKind = "interrupted-revert"
)

// Remedy says what a person can do about a reason of kind k, so that the
// copy can be exported: "" when there is nothing to advise. Not being
// recoverable is not the same as holding no data: the copy's data is
// still on the disk (see Inspection.NoData), so the advice starts from
// keeping it.
func (k ReasonKind) Remedy() string {
	switch k {
	case ReasonVolumeMeta:
		return "the layers are untouched: copy volume.meta from another replica directory of the volume, or write it by hand with Size, Head set to the volume-head-*.img present and Parent from that image's .meta, then export"
	case ReasonErrorState, ReasonRebuilding:
		return "the data it holds is still there: export it as it is with a forced export (longhorn-salvage -force), or keep it until a better copy is found"
	case ReasonBrokenChain, ReasonLayerMeta, ReasonMissingLayer:
		return "copy the missing or damaged file from another replica directory of the volume that has the same snapshot, then export"
	case ReasonMissingBackingImage:
		return "copy the backing image's directory, backing-images/<name>-<uuid>, back onto this disk from another node that has it, or give that node's file to the export (longhorn-salvage -backing FILE), then export"
	case ReasonBackingImageFormat:
		return "check the image with qemu-img check; a kind the export does not read can be converted with qemu-img convert -O raw and given to the export (longhorn-salvage -backing FILE), or keep the copy and re-adopt it as a replica of the volume"
	case ReasonBackingImageMismatch:
		return "find the backing image the copy expects (backing-images/<name>-<uuid> on another node) and give that file instead, or, if you know this file is that image, add -force"
	case ReasonInterruptedRevert:
		return "choose the state you need: a forced export (longhorn-salvage -force) reads the data from before the revert, with the writes the revert drops; for the reverted data, start the engine on a copy of the directory, which finishes the revert, and export that copy"
	case ReasonShortHead:
		return "the data is still there: a forced export (longhorn-salvage -force) reads it as the engine would, older data past the head's end included"
	}
	return ""
}

// Reason is one reason a replica directory is not recoverable.
type Reason struct {
	Kind   ReasonKind
	File   string // the file it is about, relative to the replica directory ("" for the directory)
	Detail string // what was found, for people
}

// String returns "kind: file: detail (remedy)", leaving out what is
// empty; the remedy is Kind.Remedy.
func (r Reason) String() string {
	s := string(r.Kind)
	if r.File != "" {
		s += ": " + r.File
	}
	if r.Detail != "" {
		s += ": " + r.Detail
	}
	if rem := r.Kind.Remedy(); rem != "" {
		s += " (" + rem + ")"
	}
	return s
}
