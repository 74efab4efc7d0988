package errclass

import (
	"fmt"
	"strings"
)

// Wrapf returns err with context, as a package's error: its text is
// prefix + ": " + the context (format and args) + ": " + err's text, with
// a leading prefix + ": " taken off err's text so that the prefix appears
// once ("diskscan: disk n1/d1: diskscan: ..." reads "diskscan: disk n1/d1:
// ..."). errors.Is and errors.As see err through it.
func Wrapf(prefix string, err error, format string, args ...any) error {
	return &wrapped{prefix: prefix, context: fmt.Sprintf(format, args...), err: err}
}

type wrapped struct {
	prefix, context string
	err             error
}

func (w *wrapped) Error() string {
	return w.prefix + ": " + w.context + ": " + strings.TrimPrefix(w.err.Error(), w.prefix+": ")
}

func (w *wrapped) Unwrap() error { return w.err }
