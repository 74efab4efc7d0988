package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestFlags table-tests the command line: help, stray arguments, bad
// scenarios.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		name           string
		args           []string
		code           int
		stdout, stderr []string // fragments each must hold
	}{
		{name: "-h", args: []string{"-h"}, code: 0,
			stdout: []string{"in-memory cluster on a fake clock", "Usage: rebuild-sim", "-scenario", "lifecycle, interrupt, delete, stuck, hang"}},
		{name: "-help", args: []string{"-help"}, code: 0, stdout: []string{"Usage: rebuild-sim"}},
		{name: "stray argument", args: []string{"stuck"}, code: 2, stderr: []string{`"stuck"`, "no positional arguments"}},
		{name: "unknown flag", args: []string{"-scenarios", "stuck"}, code: 2, stderr: []string{"-scenarios"}},
		{name: "unknown scenario", args: []string{"-scenario", "nope"}, code: 2,
			stderr: []string{"-scenario", `"nope"`, "valid: lifecycle, interrupt, delete, stuck, hang, or all"}},
		{name: "one scenario", args: []string{"-scenario", "delete"}, code: 0, stdout: []string{"== delete:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := runCommand(context.Background(), tc.args, &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out.String(), errOut.String())
			}
			for _, want := range tc.stdout {
				if !strings.Contains(out.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, out.String())
				}
			}
			for _, want := range tc.stderr {
				if !strings.Contains(errOut.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
				}
			}
		})
	}
}
