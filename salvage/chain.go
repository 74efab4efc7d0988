package salvage

import "io/fs"

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

	// inspected holds, for a Chain made by Inspection.Chain, what Inspect
	// saw of each file (the layer names and the backing file's path): the
	// export refuses a file that is not that one any more
	// (ErrExportChanged). A Chain built by hand has none.
	inspected map[string]fs.FileInfo
}
