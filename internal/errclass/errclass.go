// Package errclass holds the error classes several packages share. Each
// package exports them under its own name (orphan.ErrNotFound,
// backupdelete.ErrNotFound, ...) with the same value, so errors.Is matches
// across packages; a package wraps the class with its own context.
package errclass

import "errors"

// ErrNotFound: the thing asked for does not exist.
var ErrNotFound = errors.New("not found")
