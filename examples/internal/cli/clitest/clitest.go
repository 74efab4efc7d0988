// Package clitest runs table tests of an example tool's command line.
package clitest

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
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

// Buffer is a bytes.Buffer that a serving goroutine and the test share.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ServeFunc is a long-running tool's command line: it serves until ctx
// ends, sends where it serves on ready once it answers, and returns the
// exit code.
type ServeFunc func(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- string) int

// Serve starts run with args in a goroutine, waits until it is ready and
// returns where it serves, its stdout, and a stop function that cancels it
// and returns its exit code. A tool that exits before it is ready fails
// the test with its stderr.
func Serve(t *testing.T, run ServeFunc, args ...string) (string, *Buffer, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	code := make(chan int, 1)
	var out, errOut Buffer
	go func() { code <- run(ctx, args, &out, &errOut, ready) }()
	select {
	case where := <-ready:
		return where, &out, func() int { cancel(); return <-code }
	case c := <-code:
		cancel()
		t.Fatalf("exited %d before it was ready: %s", c, errOut.String())
	}
	return "", nil, nil
}
