package salvage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrNotRecoverable is wrapped by every *NotRecoverableError.
var ErrNotRecoverable = errors.New("salvage: replica directory is not recoverable")

// NotRecoverableError says why Recover refused a replica directory.
type NotRecoverableError struct {
	Dir     string
	Reasons []Reason
}

func (e *NotRecoverableError) Error() string {
	s := make([]string, len(e.Reasons))
	for i, r := range e.Reasons {
		s[i] = r.String()
	}
	return fmt.Sprintf("%v: %s: %s", ErrNotRecoverable, e.Dir, strings.Join(s, "; "))
}

// Unwrap returns ErrNotRecoverable.
func (e *NotRecoverableError) Unwrap() error { return ErrNotRecoverable }

// RecoverOptions tunes Recover. The zero value inspects with the default
// limits, refuses an unrecoverable directory and reports no progress.
type RecoverOptions struct {
	Inspect Options
	// Force exports a directory that is not recoverable, as far as its
	// chain goes. The image may then be wrong: Force is for people who
	// have read the reasons.
	Force bool
	// Progress, if set, is called as the export goes (see ExportOptions).
	Progress func(done, total int64)
	// NoChecksum leaves the image's SHA-256 out (see ExportOptions).
	NoChecksum bool
}

// Recover inspects the replica directory dir and, if it is recoverable
// (or opts.Force), writes the volume's raw image to w through ExportChain.
// It returns the inspection in every case where it got one. A directory
// that is not recoverable is refused with a *NotRecoverableError before
// anything is written to w.
func Recover(ctx context.Context, dir string, w io.WriterAt, opts RecoverOptions) (*Inspection, ExportResult, error) {
	in, err := Inspect(ctx, dir, opts.Inspect)
	if err != nil {
		return nil, ExportResult{}, err
	}
	if !in.Recoverable && !opts.Force {
		return in, ExportResult{}, &NotRecoverableError{Dir: dir, Reasons: in.Reasons}
	}
	if !in.MetaRead || len(in.Layers) == 0 {
		// Even forced, there is nothing to read without a size and a head.
		return in, ExportResult{}, &NotRecoverableError{Dir: dir, Reasons: in.Reasons}
	}
	res, err := ExportChain(ctx, dir, in.Chain(), w, ExportOptions{Progress: opts.Progress, NoChecksum: opts.NoChecksum})
	return in, res, err
}
