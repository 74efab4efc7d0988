package salvage

// Chain is what an export reads: a replica directory's layers from the
// head down to the base, the volume's size and an optional backing file.
type Chain struct {
	// Size is the volume's size in bytes (volume.meta Size): the length of
	// the exported image.
	Size int64
	// Layers are the layer image file names inside the replica directory,
	// the head first, then each parent down to the base. Removed snapshots
	// are included (the engine reads through them).
	Layers []string
	// BackingFile is the path of the backing image's file, or "" if the
	// volume has none. It is opened read-only, never following a symbolic
	// link.
	BackingFile string
}
