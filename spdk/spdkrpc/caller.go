package spdkrpc

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -source=caller.go -destination=mocks/caller.go -package=mocks

import (
	"context"
	"errors"
	"fmt"

	"github.com/caretaker-storage/caretaker/internal/bounded"
	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// Caller is what spdk.Orphans and the typed calls (BdevGetBdevs...) need of an
// SPDK connection: SPDK's JSON-RPC 2.0 contract. *Client implements it;
// a host may substitute its own (spdktest.RunConformanceTests checks it),
// and tests may use the generated mock in package spdk/spdkrpc/mocks.
type Caller interface {
	// Call sends one JSON-RPC request and decodes the reply's result into
	// result (which may be nil to discard it). It may be called from many
	// goroutines at once, and each call gets its own reply.
	//
	// It returns ctx.Err() when ctx ends first (an already-ended ctx sends
	// nothing); an *RPCError with SPDK's code and message when SPDK
	// answered with an error (errors.Is(err, ErrNotFound) for -19); a
	// *ResultError (ErrUnexpectedResult) when the result does not decode
	// into result; and an error matching ErrConnection when the
	// connection failed or the reply was unreadable: a *ProtocolError for
	// garbage or a truncated value, an error matching ErrTooLarge for a
	// reply over the Caller's size limit. Connection errors are
	// retryable; RPC errors usually are not.
	Call(ctx context.Context, method string, params, result any) error
}

// Sentinel errors, for errors.Is.
var (
	// ErrNotFound: SPDK answered -19 (ENODEV, "No such device"): the
	// bdev or lvol does not exist. *RPCError of that code matches it. It
	// is the same value in every caretaker package.
	ErrNotFound = errclass.ErrNotFound
	// ErrConnection: the connection to SPDK failed (dial, write, read, or
	// an unreadable reply). The call's outcome is unknown; the next call
	// dials again.
	ErrConnection = errors.New("spdkrpc: connection failed")
	// ErrTooLarge: a reply exceeded ClientOptions.MaxReplySize. It is
	// the value every caretaker package uses for oversized input, and
	// the error also matches ErrConnection: the stream cannot be
	// resynchronised.
	ErrTooLarge = bounded.ErrTooLarge
	// ErrInvalidOptions: NewClient was given ClientOptions it cannot use;
	// the error names the option.
	ErrInvalidOptions = errors.New("spdkrpc: invalid client options")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("spdkrpc: client closed")
	// ErrUnexpectedResult: SPDK answered, but the result is not what the
	// method returns: null, an object where a list belongs, a list of
	// non-objects or of nameless objects, anything but true from a delete.
	// It is never read as "nothing exists" or "already gone". *ResultError
	// matches it. The connection stays usable; the call may be retried.
	// It is of the malformed-input class: it matches spdk.ErrUnexpectedResult
	// and every other caretaker package's malformed-input sentinel.
	ErrUnexpectedResult = errclass.New("spdkrpc", "unexpected result", errclass.ErrMalformed)
)

// The JSON-RPC 2.0 error codes SPDK uses, and ENODEV as SPDK returns it.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	CodeNoSuchDevice   = -19
)

// RPCError is an error reply from SPDK, with its code and message as sent.
type RPCError struct {
	Method  string
	Code    int
	Message string
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("spdkrpc: %s: %s (code %d)", e.Method, e.Message, e.Code)
}

// Is reports ErrNotFound for code -19 (ENODEV).
func (e *RPCError) Is(target error) bool {
	return target == ErrNotFound && e.Code == CodeNoSuchDevice
}

// ProtocolError is a reply that is not valid JSON-RPC: garbage bytes, a
// truncated value, a value of the wrong shape. It fails the connection and
// matches ErrConnection.
type ProtocolError struct {
	Err error
}

func (e *ProtocolError) Error() string { return "spdkrpc: unreadable reply: " + e.Err.Error() }

// Unwrap returns the decoding error.
func (e *ProtocolError) Unwrap() error { return e.Err }

// Is reports ErrConnection.
func (e *ProtocolError) Is(target error) bool { return target == ErrConnection }

// ResultError is a well-formed reply whose result does not decode into the
// type the caller asked for, or is null, or breaks what the method
// promises (see ErrUnexpectedResult, which it matches). The connection
// stays usable.
type ResultError struct {
	Method string
	Err    error
}

func (e *ResultError) Error() string {
	return fmt.Sprintf("spdkrpc: %s: unexpected result: %v", e.Method, e.Err)
}

// Unwrap returns the decoding error.
func (e *ResultError) Unwrap() error { return e.Err }

// Is reports ErrUnexpectedResult and, with it, every sentinel of the
// malformed-input class (spdk.ErrUnexpectedResult among them).
func (e *ResultError) Is(target error) bool { return errors.Is(ErrUnexpectedResult, target) }
