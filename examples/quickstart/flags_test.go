package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/caretaker-storage/caretaker/examples/internal/cli/clitest"
)

// TestFlags table-tests the command line; the full run is
// TestQuickstartRunsEveryPart's.
func TestFlags(t *testing.T) {
	clitest.Run(t, func(args []string, stdout, stderr *bytes.Buffer) int {
		return runCommand(context.Background(), args, stdout, stderr)
	}, []clitest.Case{
		{Name: "-h", Args: []string{"-h"}, Code: 0,
			Stdout: []string{"throw-away Longhorn-style disk", "Usage: quickstart", "-keep"}},
		{Name: "-help", Args: []string{"-help"}, Code: 0, Stdout: []string{"Usage: quickstart"}},
		{Name: "stray argument", Args: []string{"now"}, Code: 2, Stderr: []string{`"now"`, "no positional arguments"}},
		{Name: "bad value", Args: []string{"-keep=maybe"}, Code: 2, Stderr: []string{"-keep"}},
	})
}
