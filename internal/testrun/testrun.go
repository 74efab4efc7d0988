// Package testrun runs a test function as a test of its own and says
// whether it passed, for the tests and examples of the conformance suites:
// a suite must fail a broken implementation and an empty harness, and an
// example shows a suite passing. Only tests import it.
package testrun

import (
	"os"
	"testing"
)

// Passes runs f as a test named name and reports whether it passed. Its
// progress lines (go test -v prints them) go to the null device, so an
// example's output is the same with and without -v. Tests and examples
// run one at a time unless they call t.Parallel, which these do not.
func Passes(name string, f func(t *testing.T)) bool {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	defer null.Close()
	stdout := os.Stdout
	os.Stdout = null
	defer func() { os.Stdout = stdout }()
	return testing.RunTests(func(_, _ string) (bool, error) { return true, nil },
		[]testing.InternalTest{{Name: name, F: f}})
}
