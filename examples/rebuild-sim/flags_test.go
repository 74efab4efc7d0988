package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/caretaker-storage/caretaker/examples/internal/cli/clitest"
)

// TestFlags table-tests the command line: help, stray arguments, bad
// scenarios.
func TestFlags(t *testing.T) {
	clitest.Run(t, func(args []string, stdout, stderr *bytes.Buffer) int {
		return runCommand(context.Background(), args, stdout, stderr)
	}, []clitest.Case{
		{Name: "-h", Args: []string{"-h"}, Code: 0,
			Stdout: []string{"in-memory cluster on a fake clock", "Usage: rebuild-sim", "-scenario", "lifecycle, interrupt, delete, stuck, hang"}},
		{Name: "-help", Args: []string{"-help"}, Code: 0, Stdout: []string{"Usage: rebuild-sim"}},
		{Name: "stray argument", Args: []string{"stuck"}, Code: 2, Stderr: []string{`"stuck"`, "no positional arguments"}},
		{Name: "unknown flag", Args: []string{"-scenarios", "stuck"}, Code: 2, Stderr: []string{"-scenarios"}},
		{Name: "unknown scenario", Args: []string{"-scenario", "nope"}, Code: 2,
			Stderr: []string{"-scenario", `"nope"`, "valid: lifecycle, interrupt, delete, stuck, hang, or all"}},
		{Name: "one scenario", Args: []string{"-scenario", "delete"}, Code: 0, Stdout: []string{"== delete:"}},
	})
}
