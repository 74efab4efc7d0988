// Package longhorn holds the Longhorn vocabulary that several caretaker
// packages share, so each is defined once; the packages re-export it.
package longhorn

// DataEngine is Longhorn's data engine: v1 (files and processes) or v2
// (SPDK).
type DataEngine string

// The data engines.
const (
	DataEngineV1 DataEngine = "v1"
	DataEngineV2 DataEngine = "v2"
)
