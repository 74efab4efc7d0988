package diskscan

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-multierror"

	"github.com/caretaker-storage/caretaker/internal/bounded"
	"github.com/caretaker-storage/caretaker/internal/errclass"
	"github.com/caretaker-storage/caretaker/orphan"
)

// Sentinel errors, for errors.Is. A purge Delete refuses wraps
// orphan.ErrPreconditionFailed and one of ErrUnsafePath, ErrNotReplica,
// ErrDiskChanged, ErrDiskInvalid, ErrUnknownDisk, ErrStillExpected,
// ErrNoneExpected, ErrMountPoint, ErrNotRegular, ErrForeignTombstone or
// ErrChanged.
var (
	// ErrUnsafePath: a data directory name that is empty, "." or "..", or
	// contains a slash or a NUL byte. Nothing with such a name is ever
	// touched.
	ErrUnsafePath = errors.New("diskscan: unsafe data directory name")
	// ErrNotReplica: the entry is not a replica directory (a symlink, a
	// file, a name without Longhorn's suffix, a missing or invalid
	// volume.meta).
	ErrNotReplica = errors.New("diskscan: not a replica directory")
	// ErrDiskChanged: the disk's config UUID or filesystem ID is not the
	// one the host expects or the record names.
	ErrDiskChanged = errors.New("diskscan: disk changed")
	// ErrDiskInvalid: the disk's config is missing or invalid, or its
	// filesystem is shared with another disk of the node.
	ErrDiskInvalid = errors.New("diskscan: disk invalid")
	// ErrUnknownDisk: the record names a disk SetDisks did not set.
	ErrUnknownDisk = errors.New("diskscan: unknown disk")
	// ErrStillExpected: a replica of the cluster expects the directory.
	ErrStillExpected = errors.New("diskscan: directory is expected by a replica")
	// ErrNoneExpected: the expected set of the disk is empty, which is
	// treated as a broken view unless Options.AllowNoneExpected is set.
	ErrNoneExpected = errors.New("diskscan: no replica is expected on the disk")

	// ErrChanged: the directory, or one inside it, was replaced, moved or
	// removed between the purge's checks and its acts (a symbolic link or
	// another directory in its place): what is there now was not checked,
	// so it is left alone. The next scan sees what is there.
	ErrChanged = errors.New("diskscan: directory changed under the purge")

	// ErrMountPoint: a mount point (another filesystem, or a bind mount
	// of the same one) is at or below the directory. A purge never crosses
	// a filesystem boundary; the mount and everything in it are untouched.
	ErrMountPoint = errors.New("diskscan: a mount point is in the way")
	// ErrForeignTombstone: something looks like a caretaker tombstone (or
	// its marker) but caretaker cannot prove it made it. It is reported and
	// left alone.
	ErrForeignTombstone = errors.New("diskscan: tombstone not made by caretaker")

	// ErrCorrupt: a file or reply is not what its format says (bad JSON,
	// a missing key, a value of the wrong type). It is diskscan's sentinel
	// of the library's one malformed-input class: errors.Is matches it
	// with every package's (salvage.ErrCorrupt, tokenring.ErrMalformedReply,
	// ...) both ways.
	ErrCorrupt = errclass.New("diskscan", "corrupt input", errclass.ErrMalformed)
	// ErrTooLarge: a file or reply is larger than its read limit. It is
	// the same value in every caretaker package (internal/bounded), and
	// the error wraps a *bounded.TooLargeError naming the input and limit.
	ErrTooLarge = bounded.ErrTooLarge
	// ErrNotRegular: a file that must be a regular file (volume.meta,
	// longhorn-disk.cfg, a replica list) is a FIFO, socket, device,
	// directory or symbolic link. It is never opened in a way that could
	// block, and never read.
	ErrNotRegular = errors.New("diskscan: not a regular file")
)

// ParseError says which input was bad and why. It wraps ErrCorrupt,
// ErrNotRegular, or a *bounded.TooLargeError (which wraps ErrTooLarge).
type ParseError struct {
	Input  string // "volume.meta", "longhorn-disk.cfg", "replica list"
	Reason string // what was wrong, for people
	Err    error  // ErrCorrupt, ErrNotRegular or a *bounded.TooLargeError
}

func (e *ParseError) Error() string {
	if errors.Is(e.Err, ErrTooLarge) { // its own text would repeat Input and Reason
		return fmt.Sprintf("diskscan: %v: %s: %s", ErrTooLarge, e.Input, e.Reason)
	}
	return fmt.Sprintf("%v: %s: %s", e.Err, e.Input, e.Reason)
}

// Unwrap returns ErrCorrupt, ErrNotRegular or the *bounded.TooLargeError.
func (e *ParseError) Unwrap() error { return e.Err }

// tooLarge wraps a *bounded.TooLargeError in a *ParseError.
func tooLarge(tl *bounded.TooLargeError) error {
	return &ParseError{Input: tl.What, Reason: fmt.Sprintf("larger than %d bytes", tl.Limit), Err: tl}
}

func corrupt(input, format string, args ...any) error {
	return &ParseError{Input: input, Reason: fmt.Sprintf(format, args...), Err: ErrCorrupt}
}

// refuse builds a Delete refusal: it matches orphan.ErrPreconditionFailed
// and why, and its text starts with why's ("diskscan: ...").
func refuse(why error, format string, args ...any) error {
	return fmt.Errorf("%w: %s (%w)", why, fmt.Sprintf(format, args...), orphan.ErrPreconditionFailed)
}

// withPrefix gives the error an exported function returns the package's
// prefix when it lacks one: an error of the standard library or of the
// host's ExpectedSource, wrapped with context on the way. errors.Is and
// errors.As see through it. A context's own error, returned as it is, is
// left alone for hosts that compare it with ==, and so is a
// *multierror.Error, whose text lists errors that carry the prefix.
func withPrefix(err *error) {
	e := *err
	if e == nil || e == context.Canceled || e == context.DeadlineExceeded || strings.HasPrefix(e.Error(), "diskscan: ") {
		return
	}
	if _, ok := e.(*multierror.Error); ok {
		return
	}
	*err = &prefixedError{e}
}

type prefixedError struct{ err error }

func (e *prefixedError) Error() string { return "diskscan: " + e.err.Error() }
func (e *prefixedError) Unwrap() error { return e.err }
