// Package salvage inspects, ranks and exports what an orphaned Longhorn v1
// replica directory holds, read-only: it tells whether a volume's data can
// be recovered from it, which of a volume's leftover copies is the best,
// and rebuilds the volume's raw image from it exactly as the engine reads
// it.
package salvage
