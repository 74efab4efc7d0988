package spdk

import (
	"context"
	"strings"

	"github.com/caretaker-storage/caretaker/internal/errclass"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// Sentinel errors of the SPDK replies the adapter reads, for errors.Is.
var (
	// ErrNotFound: SPDK answered -19 (ENODEV): the bdev or lvol does not
	// exist. It is the same value as spdkrpc.ErrNotFound and every other
	// caretaker package's ErrNotFound.
	ErrNotFound = spdkrpc.ErrNotFound
	// ErrUnexpectedResult: SPDK answered, but the result is not what the
	// method returns (a null listing, a nameless element, anything but
	// true from a delete, an lvol without a UUID or an "lvstore/lvol"
	// alias). It is never read as "nothing exists" or "already gone".
	// It is of the malformed-input class: an *spdkrpc.ResultError
	// matches it, and so does spdkrpc.ErrUnexpectedResult and every
	// other caretaker package's malformed-input sentinel.
	ErrUnexpectedResult = errclass.New("spdk", "unexpected result", errclass.ErrMalformed)
)

// prefix starts every error text of this package.
const prefix = "spdk: "

// refusal is a sentinel of this package that wraps
// orphan.ErrPreconditionFailed: nothing was deleted.
type refusal struct{ text string }

func (e *refusal) Error() string { return prefix + e.text }

// Unwrap returns orphan.ErrPreconditionFailed.
func (e *refusal) Unwrap() error { return orphan.ErrPreconditionFailed }

// errRefused is a refusal without a sentinel of its own.
var errRefused error = &refusal{"precondition failed, nothing deleted"}

// prefixed gives an error made elsewhere (an spdkrpc call's, a records
// lookup's) the context of this package.
type prefixed struct{ err error }

func (e *prefixed) Error() string { return prefix + e.err.Error() }
func (e *prefixed) Unwrap() error { return e.err }

// withPrefix returns err with a text that starts with this package's
// prefix, for the exported functions to return. A context's own error is
// returned as it is, as every Go API does.
func withPrefix(err error) error {
	if err == nil || err == context.Canceled || err == context.DeadlineExceeded || strings.HasPrefix(err.Error(), prefix) {
		return err
	}
	return &prefixed{err}
}
