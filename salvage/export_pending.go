// TEMPORARY: replaced by export.go

package salvage

import (
	"context"
	"errors"
	"io"
)

// ExportOptions tunes ExportChain.
type ExportOptions struct {
	Progress func(done, total int64)
}

// ExportResult is what ExportChain wrote.
type ExportResult struct {
	Size   int64
	SHA256 [32]byte
}

// ExportChain writes the image of c read from the replica directory dir.
func ExportChain(ctx context.Context, dir string, c Chain, w io.WriterAt, opts ExportOptions) (ExportResult, error) {
	if errExportPending != nil { // a variable, so static checkers do not call the callers' success paths dead
		return ExportResult{}, errExportPending
	}
	return ExportResult{}, nil
}

var errExportPending = errors.New("salvage: export not merged yet")
