//go:build !linux

package salvage

import "fmt"

func exportSupported() error {
	return fmt.Errorf("%w: FIEMAP, the engine's extent map, is Linux's", ErrExportUnsupported)
}

// exportCursor exists so that the portable code compiles; it is never
// made, as ExportChain stops at exportSupported.
type exportCursor struct{ seekData bool }

func newExportCursor(exportLayer, int64, bool) (*exportCursor, error) { return nil, exportSupported() }

func (*exportCursor) window(int64, int64, func(s, e int64)) error { return exportSupported() }
