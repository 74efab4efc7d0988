// Package cli gives the example tools one command-line behaviour: -h
// prints what the tool does, its usage line and its flags to stdout and
// exits 0; a bad flag or a stray argument prints the reason and the usage
// to stderr and exits 2; a destructive action asked for without -yes is a
// dry run that exits 1 and says how to confirm; any other error exits 1.
package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
)

// Command describes a tool for its help text.
type Command struct {
	Name  string // the command's name, used as the prefix of its errors
	Usage string // the usage line, without "Usage: "
	About string // one paragraph: what the tool does
	// Positional names the positional arguments the tool takes; empty
	// means none, and any is an error.
	Positional string
}

// ErrDryRun is wrapped by the error a tool returns when it was asked for
// a destructive action without -yes and did nothing.
var ErrDryRun = errors.New("dry run")

// DryRun returns the error of a destructive action not confirmed with
// -yes: what was not done and how to confirm it.
func DryRun(what string) error {
	return fmt.Errorf("%w: nothing was %s; add -yes to confirm", ErrDryRun, what)
}

// UsageError is a bad command line: an unknown or malformed flag, a stray
// argument, a missing required flag. Parse has already printed it with
// the usage; it exits 2.
type UsageError struct {
	Err     error
	printed bool // Parse printed it already
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError; Exit prints it, with a hint to run -h.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// FlagSet returns a flag set whose usage prints the command's paragraph,
// its usage line and its flags.
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
}

// Parse parses args into fs. On -h or -help it prints the help to stdout
// and returns flag.ErrHelp. On a bad flag or a stray argument it prints
// the reason and the usage to stderr and returns a *UsageError.
func (c Command) Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var msg bytes.Buffer
	fs.SetOutput(&msg)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.PrintUsage(fs, stdout)
		return flag.ErrHelp
	case err != nil:
		stderr.Write(msg.Bytes()) // flag's message names the flag, then the usage
		return &UsageError{Err: err, printed: true}
	case fs.NArg() > 0 && c.Positional == "":
		err := fmt.Errorf("unexpected arguments %q: %s takes no positional arguments (flags go before any argument)", fs.Args(), c.Name)
		fmt.Fprintf(stderr, "%s: %v\n", c.Name, err)
		return &UsageError{Err: err, printed: true}
	}
	return nil
}

// Exit turns a tool's result into its exit code, printing err to stderr
// unless Parse already did: 0 for success and for -h, 2 for a bad
// command line, 1 for anything else (a dry run included).
func (c Command) Exit(err error, stderr io.Writer) int {
	var ue *UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		if !ue.printed {
			fmt.Fprintf(stderr, "%s: %v (see %s -h)\n", c.Name, err, c.Name)
		}
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", c.Name, err)
		return 1
	}
}
