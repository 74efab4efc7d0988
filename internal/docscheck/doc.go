// Package docscheck keeps the repository's markdown honest: its test
// fails when a README names code that does not exist (a `pkg.Name`, a
// `Type.Member`, an identifier or a .go/.yaml path in backticks), or
// holds a Go snippet that is not the text of a real, compiled .go file.
//
// The snippets of the top-level README live in snippets_test.go, which go
// test and go vet compile. It is a test file so that no non-test code under
// internal/ imports a public package of the module: imports run downward
// only. A snippet of a nested module's README lives in that module's own
// files.
package docscheck
