package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
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
		{name: "help names the exit codes", args: []string{"-h"}, code: 0, stdout: "1 failed, 2 bad usage."},
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

// TestExitCodesFooterNamesOnlyTheToolsFlags: the footer names code 3
// with the flag that turns the dry run into the action, and not at all
// for a tool with neither -yes nor -dry-run.
func TestExitCodesFooterNamesOnlyTheToolsFlags(t *testing.T) {
	for _, tc := range []struct {
		flag, want, not string
	}{
		{"yes", "3 dry run that would act (add -yes)", "-dry-run"},
		{"dry-run", "3 dry run that would act (run again without -dry-run)", "-yes"},
		{"", "2 bad usage,\n4 refused", "3 dry run"},
	} {
		fs := flag.NewFlagSet("tool", flag.ContinueOnError)
		if tc.flag != "" {
			fs.Bool(tc.flag, false, "")
		}
		got := ExitCodes(fs, true)
		if !strings.Contains(got, tc.want) || strings.Contains(got, tc.not) {
			t.Errorf("with -%s: %q; want %q and no %q", tc.flag, got, tc.want, tc.not)
		}
	}
}

// TestExitCodesFooterNamesRefusalsOnlyForAToolThatRefuses: a tool that
// cannot exit 4 does not list it.
func TestExitCodesFooterNamesRefusalsOnlyForAToolThatRefuses(t *testing.T) {
	fs := flag.NewFlagSet("tool", flag.ContinueOnError)
	if got := ExitCodes(fs, false); strings.Contains(got, "4 refused") || !strings.HasSuffix(got, "2 bad usage.") {
		t.Errorf("a tool that never refuses: %q", got)
	}
	var help strings.Builder
	Command{Name: "tool", Refusals: []error{ErrRefused}}.PrintUsage(fs, &help)
	if !strings.Contains(help.String(), "4 refused") {
		t.Errorf("a tool with Refusals does not list code 4:\n%s", help.String())
	}
}

func TestExit(t *testing.T) {
	c := Command{Name: "tool"}
	var errOut bytes.Buffer
	if code := c.Exit(Usagef("-dir is required"), &errOut); code != 2 || !strings.Contains(errOut.String(), "-dir is required") {
		t.Fatalf("usage: exit %d, %q", code, errOut.String())
	}
	if code := c.Exit(DryRun("deleted"), &errOut); code != ExitDryRun || !strings.Contains(errOut.String(), "add -yes") {
		t.Fatalf("dry run: exit %d, %q", code, errOut.String())
	}
	if code := c.Exit(flag.ErrHelp, &errOut); code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	errOut.Reset()
	if code := c.Exit(Refused(errors.New("the guard said no")), &errOut); code != ExitRefused || !strings.Contains(errOut.String(), "the guard said no") {
		t.Fatalf("refused: exit %d, %q", code, errOut.String())
	}
	errLocked := errors.New("locked")
	c.Refusals = []error{errLocked}
	if code := c.Exit(fmt.Errorf("deleting: %w", errLocked), &errOut); code != ExitRefused {
		t.Fatalf("a listed refusal: exit %d", code)
	}
	if code := c.Exit(errors.New("disk on fire"), &errOut); code != ExitFailed {
		t.Fatalf("failure: exit %d", code)
	}
	if code := c.Exit(YesWithout(true, "-delete"), &errOut); code != ExitUsage || !strings.Contains(errOut.String(), "-yes confirms -delete") {
		t.Fatalf("-yes alone: exit %d, %q", code, errOut.String())
	}
	if YesWithout(false, "-delete") != nil {
		t.Fatal("YesWithout(false) is an error")
	}
	if !errors.Is(DryRun("x"), ErrDryRun) {
		t.Fatal("DryRun does not wrap ErrDryRun")
	}
}

// TestBadFlagIsOneLine: a malformed flag prints the reason and a pointer to
// -h, not the whole usage.
func TestBadFlagIsOneLine(t *testing.T) {
	c := Command{Name: "tool", Usage: "tool [-n N]", About: "Tool does a thing."}
	fs := c.FlagSet()
	fs.Int("n", 1, "how many")
	var out, errOut bytes.Buffer
	if code := c.Exit(c.Parse(fs, []string{"-n", "x"}, &out, &errOut), &errOut); code != ExitUsage {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "tool: ") || !strings.Contains(lines[0], "-n") || !strings.HasSuffix(lines[0], "(see tool -h)") {
		t.Fatalf("stderr is not one line naming -n and pointing at -h:\n%s", errOut.String())
	}
}

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int
		noun string
		want string
	}{
		{1, "lvstore", "1 lvstore"}, {2, "lvstore", "2 lvstores"}, {0, "orphan", "0 orphans"},
		{1, "entry", "1 entry"}, {3, "entry", "3 entries"}, {2, "key", "2 keys"}, {2, "block file", "2 block files"},
	} {
		if got := Count(tc.n, tc.noun); got != tc.want {
			t.Errorf("Count(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
}
