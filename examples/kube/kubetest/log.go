package kubetest

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
)

// Log keeps the log of a host that runs inside the test process (a
// controller on a manager of its own, say) in memory, so that a failed
// test can show what the host did. It is safe for concurrent use, and
// goes on taking writes after the test ends (a host stopping late).
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns everything written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// HostLog returns a logger, at debug level, for a host named name that
// runs inside the test process, and the Log it writes to. The log is
// printed with t.Logf when the test ends, if it failed or ran with -v:
// what StartChild does for a host in a child process.
func HostLog(t testing.TB, name string) (*slog.Logger, *Log) {
	t.Helper()
	l := &Log{}
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("%s log:\n%s", name, l.String())
		}
	})
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug})), l
}
