// Package clitest runs table tests of an example tool's command line.
package clitest

import (
	"bytes"
	"strings"
	"testing"
)

// Case is one command line and what it must do.
type Case struct {
	Name   string
	Args   []string
	Code   int      // the exit code
	Stdout []string // fragments stdout must hold
	Stderr []string // fragments stderr must hold
	// Check, if set, runs after the command, for effects (nothing
	// deleted, a file written).
	Check func(t *testing.T, stdout, stderr string)
}

// Run runs each case through run as a subtest.
func Run(t *testing.T, run func(args []string, stdout, stderr *bytes.Buffer) int, cases []Case) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tc.Args, &out, &errOut)
			if code != tc.Code {
				t.Fatalf("%q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.Args, code, tc.Code, out.String(), errOut.String())
			}
			for _, want := range tc.Stdout {
				if !strings.Contains(out.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, out.String())
				}
			}
			for _, want := range tc.Stderr {
				if !strings.Contains(errOut.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
				}
			}
			if tc.Check != nil {
				tc.Check(t, out.String(), errOut.String())
			}
		})
	}
}
