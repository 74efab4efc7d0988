// Package crd holds the CustomResourceDefinition of Longhorn's Orphan
// resource that the example's store uses, for tests and installers.
package crd

import _ "embed"

// Orphans is the manifest of orphans.longhorn.io (YAML).
//
//go:embed orphans.longhorn.io.yaml
var Orphans []byte
