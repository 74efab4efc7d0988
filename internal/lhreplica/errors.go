package lhreplica

import (
	"errors"
	"fmt"
)

// ErrCorrupt is wrapped by every *MetaError: a replica's meta file that is
// not what the engine writes.
var ErrCorrupt = errors.New("corrupt replica metadata")

// MetaError says which meta file did not parse, and why.
type MetaError struct {
	File   string // volume.meta, <image>.meta or revision.counter
	Detail string // what was wrong, for people
}

// Error returns "<file>: <detail>".
func (e *MetaError) Error() string { return e.File + ": " + e.Detail }

// Unwrap returns ErrCorrupt.
func (e *MetaError) Unwrap() error { return ErrCorrupt }

func corrupt(file, format string, args ...any) *MetaError {
	return &MetaError{File: file, Detail: fmt.Sprintf(format, args...)}
}
