package cli

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	c := Command{Name: "tool", Usage: "tool [-n N]", About: "Tool does a thing."}
	for _, tc := range []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{name: "help", args: []string{"-h"}, code: 0, stdout: "Tool does a thing."},
		{name: "long help", args: []string{"-help"}, code: 0, stdout: "-n int"},
		{name: "bad value", args: []string{"-n", "x"}, code: 2, stderr: "-n"},
		{name: "unknown flag", args: []string{"-m"}, code: 2, stderr: "-m"},
		{name: "stray argument", args: []string{"now"}, code: 2, stderr: `"now"`},
		{name: "fine", args: []string{"-n", "3"}, code: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := c.FlagSet()
			fs.Int("n", 1, "how many")
			var out, errOut bytes.Buffer
			code := c.Exit(c.Parse(fs, tc.args, &out, &errOut), &errOut)
			if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errOut.String(), tc.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
			}
		})
	}
}

func TestExit(t *testing.T) {
	c := Command{Name: "tool"}
	var errOut bytes.Buffer
	if code := c.Exit(Usagef("-dir is required"), &errOut); code != 2 || !strings.Contains(errOut.String(), "-dir is required") {
		t.Fatalf("usage: exit %d, %q", code, errOut.String())
	}
	if code := c.Exit(DryRun("deleted"), &errOut); code != 1 || !strings.Contains(errOut.String(), "add -yes") {
		t.Fatalf("dry run: exit %d, %q", code, errOut.String())
	}
	if code := c.Exit(flag.ErrHelp, &errOut); code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	if !errors.Is(DryRun("x"), ErrDryRun) {
		t.Fatal("DryRun does not wrap ErrDryRun")
	}
}
