// Package bounded reads input with a size limit, and is the one place
// caretaker says "too large": every package exports ErrTooLarge as this
// package's value, so errors.Is matches an oversized meta file, RPC reply
// or REST reply alike, whichever package reported it.
package bounded

import (
	"errors"
	"fmt"
	"io"
)

// ErrTooLarge is wrapped by every *TooLargeError.
var ErrTooLarge = errors.New("input too large")

// TooLargeError says which input went over which limit.
type TooLargeError struct {
	What  string // the input: a file name, "reply to bdev_get_bdevs", ...
	Limit int64  // the limit in bytes
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: larger than %d bytes: %v", e.What, e.Limit, ErrTooLarge)
}

// Unwrap returns ErrTooLarge.
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// ReadAll reads r to its end, or fails with a *TooLargeError naming what
// once more than limit bytes arrive. It never reads more than limit+1
// bytes.
func ReadAll(r io.Reader, limit int64, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{What: what, Limit: limit}
	}
	return data, nil
}

// Reader passes reads through until more than Limit bytes have been read,
// then fails with a *TooLargeError: for streaming decoders that must not
// buffer an unbounded input. Reset starts a new count, for connections
// that carry one message after another.
type Reader struct {
	R     io.Reader
	Limit int64
	What  string
	n     int64
}

// Read implements io.Reader.
func (l *Reader) Read(p []byte) (int, error) {
	if l.n > l.Limit {
		return 0, &TooLargeError{What: l.What, Limit: l.Limit}
	}
	if room := l.Limit + 1 - l.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := l.R.Read(p)
	l.n += int64(n)
	if l.n > l.Limit {
		return n, &TooLargeError{What: l.What, Limit: l.Limit}
	}
	return n, err
}

// Reset starts counting again from already bytes (what a buffered reader
// holds of the next message).
func (l *Reader) Reset(already int64) { l.n = already }

// Count is how many bytes were read since the last Reset.
func (l *Reader) Count() int64 { return l.n }
