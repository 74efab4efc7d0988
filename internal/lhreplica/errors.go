package lhreplica

import (
	"fmt"

	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// ErrCorrupt is wrapped by every *MetaError: a replica's meta file that is
// not what the engine writes. It is of the malformed-input class, so it
// matches diskscan.ErrCorrupt and every other package's malformed sentinel
// under errors.Is. Its text, like MetaError's, carries salvage's prefix:
// salvage exports both (salvage.ErrCorrupt, salvage.MetaError), while
// diskscan turns a MetaError into its own *ParseError.
var ErrCorrupt = errclass.New("salvage", "corrupt replica metadata", errclass.ErrMalformed)

// MetaError says which meta file did not parse, and why.
type MetaError struct {
	File   string // volume.meta, <image>.meta or revision.counter
	Detail string // what was wrong, for people
}

// Error returns "salvage: <file>: <detail>" (see ErrCorrupt for the
// prefix).
func (e *MetaError) Error() string { return "salvage: " + e.File + ": " + e.Detail }

// Unwrap returns ErrCorrupt.
func (e *MetaError) Unwrap() error { return ErrCorrupt }

func corrupt(file, format string, args ...any) *MetaError {
	return &MetaError{File: file, Detail: fmt.Sprintf(format, args...)}
}
