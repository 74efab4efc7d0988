// Package other exports a value package badsentinel exports too.
package other

import "errors"

// ErrShared is a class without a package prefix.
var ErrShared = errors.New("a shared class")
