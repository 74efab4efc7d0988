// Package other exports a value package badsentinel exports too.
package other

import "errors"

// ErrShared is made here without the package's prefix: although package
// badsentinel takes it too, the check names it.
var ErrShared = errors.New("a shared class")
