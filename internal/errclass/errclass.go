// Package errclass holds the error classes several packages share, so that
// errors.Is matches across packages.
//
// ErrNotFound is exported by each package under its own name with the same
// value (orphan.ErrNotFound, backupdelete.ErrNotFound, ...); a package wraps it
// with its own context.
//
// The malformed-input and redirect classes are exported by each package as a
// sentinel of its own, made with New, whose text carries the package's prefix
// ("diskscan: corrupt input") and which matches, under errors.Is, the class and
// every other package's sentinel of the same class. So a host that wants "any
// malformed input" tests against one package's sentinel and catches them all,
// while a host that wants one package's text keeps it.
package errclass

import "errors"

// ErrNotFound: the thing asked for does not exist.
var ErrNotFound = errors.New("not found")

// ErrMalformed is the class of input that does not parse or breaks the format
// it claims: a corrupt file, a reply that is not the wire format, a field out
// of range. Nothing is deleted on the strength of such input.
var ErrMalformed = errors.New("malformed input")

// ErrRedirect is the class of a server answer that redirects (HTTP 3xx). The
// library never follows one: a redirect could carry a signed or destructive
// request to another host.
var ErrRedirect = errors.New("redirect refused")

// New returns a package's sentinel of class (ErrMalformed or ErrRedirect).
// Its text is prefix + ": " + text. errors.Is(s, class) holds, and so does
// errors.Is(s, t) for any t made by New with the same class.
func New(prefix, text string, class error) error {
	return &sentinel{msg: prefix + ": " + text, class: class}
}

type sentinel struct {
	msg   string
	class error
}

func (s *sentinel) Error() string { return s.msg }

// Is matches the class itself and every sentinel of the same class.
func (s *sentinel) Is(target error) bool {
	if target == s.class {
		return true
	}
	t, ok := target.(*sentinel)
	return ok && t.class == s.class
}

// Unwrap exposes the class, so errors.Is(err, class) holds through wrapping.
func (s *sentinel) Unwrap() error { return s.class }
