// Package cli gives the example tools one command-line behaviour and one
// exit-code convention, so a script can tell their outcomes apart:
//
//	0  ExitOK       done, or nothing to do (a dry run that would do nothing included)
//	1  ExitFailed   failed
//	2  ExitUsage    bad usage: an unknown or malformed flag, a stray argument,
//	                a missing required flag, flags that conflict, -yes without an action
//	3  ExitDryRun   a dry run that would act: add -yes to do it
//	4  ExitRefused  refused by a safety rule (a guard, the last copy, a lock)
//
// -h prints what the tool does, its usage line, its flags and these codes
// to stdout and exits 0. Every error prints one line to stderr, prefixed
// with the tool's name; a usage error ends with a pointer to -h instead of
// the whole usage.
package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// The exit codes of every example tool.
const (
	ExitOK      = 0 // done, or nothing to do
	ExitFailed  = 1 // failed
	ExitUsage   = 2 // bad usage
	ExitDryRun  = 3 // a dry run that would act
	ExitRefused = 4 // refused by a safety rule (guard, last copy, lock)
)

// ExitCodes returns the help text's paragraph on the exit codes of a
// tool with the flags of fs: code 3 is named only for a tool that has a
// dry run, with the flag that turns it into the action (-yes confirms; a
// -dry-run flag is dropped), and code 4 only for a tool that refuses.
func ExitCodes(fs *flag.FlagSet, refuses bool) string {
	dry := ""
	switch {
	case fs.Lookup("yes") != nil:
		dry = " 3 dry run that would act (add -yes),"
	case fs.Lookup("dry-run") != nil:
		dry = " 3 dry run that would act (run again without -dry-run),"
	}
	codes := "Exit codes: 0 done (or nothing to do), 1 failed, 2 bad usage," + dry
	if !refuses {
		return strings.TrimSuffix(codes, ",") + "."
	}
	return codes + "\n4 refused by a safety rule (a guard, the last copy, a lock)."
}

// Command describes a tool for its help text.
type Command struct {
	Name  string // the command's name, used as the prefix of its errors
	Usage string // the usage line, without "Usage: "
	About string // one paragraph: what the tool does
	// Positional names the positional arguments the tool takes; empty
	// means none, and any is an error.
	Positional string
	// Refusals are the errors (matched with errors.Is) that mean a safety
	// rule refused the action: Exit returns ExitRefused for them.
	Refusals []error
	// Refuses says the tool can exit ExitRefused by other means than
	// Refusals (it returns Refused errors or the code itself); with
	// neither, its help does not list code 4.
	Refuses bool
}

// ErrDryRun is wrapped by the error a tool returns when it was asked for
// a destructive action without -yes and did nothing.
var ErrDryRun = errors.New("dry run")

// DryRun returns the error of a destructive action not confirmed with
// -yes: what was not done and how to confirm it. Exit returns ExitDryRun
// for it; a dry run that would do nothing returns nil instead.
func DryRun(what string) error {
	return fmt.Errorf("%w: nothing was %s; add -yes to confirm", ErrDryRun, what)
}

// ErrRefused is wrapped by the error a tool returns when a safety rule
// refused the action (a guard, the last copy of a volume, a lock held by
// another process): Exit returns ExitRefused for it.
var ErrRefused = errors.New("refused")

// Refused wraps err as a refusal by a safety rule.
func Refused(err error) error {
	return fmt.Errorf("%w: %w", ErrRefused, err)
}

// YesWithout returns the usage error of -yes given without any of the
// actions it confirms, or nil when yes is false or an action was given.
func YesWithout(yes bool, actions ...string) error {
	if !yes {
		return nil
	}
	return Usagef("-yes confirms %s, and none was given", strings.Join(actions, " or "))
}

// Count returns n with the noun in the number it needs: "1 lvstore",
// "2 lvstores", "0 entries". noun is the singular.
func Count(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %s", n, plural(noun))
}

// plural is English's regular plural of noun's last word.
func plural(noun string) string {
	switch {
	case strings.HasSuffix(noun, "y") && len(noun) > 1 && !strings.ContainsRune("aeiou", rune(noun[len(noun)-2])):
		return noun[:len(noun)-1] + "ies"
	case strings.HasSuffix(noun, "s"), strings.HasSuffix(noun, "x"), strings.HasSuffix(noun, "ch"), strings.HasSuffix(noun, "sh"):
		return noun + "es"
	}
	return noun + "s"
}

// UsageError is a bad command line: an unknown or malformed flag, a stray
// argument, a missing required flag, flags that conflict. Exit prints it
// as one line pointing at -h, and returns ExitUsage.
type UsageError struct {
	Err error
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError; Exit prints it, with a hint to run -h.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// FlagSet returns a flag set whose usage prints the command's paragraph,
// its usage line, its flags and the exit codes.
func (c Command) FlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	fs.Usage = func() { c.PrintUsage(fs, fs.Output()) }
	return fs
}

// PrintUsage writes the help text of fs to w.
func (c Command) PrintUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "%s\n\nUsage: %s\n\nFlags:\n", c.About, c.Usage)
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
	fmt.Fprintf(w, "\n%s\n", ExitCodes(fs, c.Refuses || len(c.Refusals) > 0))
}

// Parse parses args into fs. On -h or -help it prints the help to stdout
// and returns flag.ErrHelp. On a bad flag or a stray argument it returns
// a *UsageError, which Exit prints as one line pointing at -h.
func (c Command) Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var msg bytes.Buffer
	usage := fs.Usage
	fs.Usage = func() {} // the reason alone, not the whole usage
	fs.SetOutput(&msg)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.PrintUsage(fs, stdout)
		return flag.ErrHelp
	case err != nil:
		return &UsageError{Err: err} // flag's error names the flag and the value
	case fs.NArg() > 0 && c.Positional == "":
		return &UsageError{Err: fmt.Errorf("unexpected arguments %q: %s takes no positional arguments (flags go before any argument)", fs.Args(), c.Name)}
	}
	return nil
}

// Exit turns a tool's result into its exit code, printing err to stderr
// as one line: ExitOK for success and for -h,
// ExitUsage for a bad command line, ExitDryRun for a dry run that would
// act, ExitRefused for a refusal by a safety rule (ErrRefused or one of
// c.Refusals), ExitFailed for anything else.
func (c Command) Exit(err error, stderr io.Writer) int {
	var ue *UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v (see %s -h)\n", c.Name, err, c.Name)
		return ExitUsage
	}
	fmt.Fprintf(stderr, "%s: %v\n", c.Name, err)
	switch {
	case errors.Is(err, ErrDryRun):
		return ExitDryRun
	case c.refused(err):
		return ExitRefused
	}
	return ExitFailed
}

// refused reports whether err is a refusal by a safety rule.
func (c Command) refused(err error) bool {
	if errors.Is(err, ErrRefused) {
		return true
	}
	for _, r := range c.Refusals {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}
