package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Child is a host running as a child process of the test binary, so
// that a test can SIGKILL it in the middle of its work.
type Child struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	done chan struct{}
	// Log is the path of the file its standard output and error go to.
	Log string
}

// StartChild starts the test binary again with env added to its
// environment (the test's TestMain reads it and runs the host instead of
// the tests), its output to a log file in dir. When the test ends the
// child is stopped (SIGTERM, then SIGKILL after 10 s) and its log printed
// if the test failed or ran with -v. The child gets SIGKILL if the test
// binary dies.
func StartChild(t testing.TB, name, dir string, env ...string) *Child {
	t.Helper()
	logPath := filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano()))
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // the child has its own descriptor
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{t: t, name: name, cmd: cmd, done: make(chan struct{}), Log: logPath}
	go func() { _ = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() || testing.Verbose() {
			data, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", name, data)
		}
	})
	return c
}

// Kill SIGKILLs the child and waits for it to be gone.
func (c *Child) Kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// Stop asks the child to stop (SIGTERM) and waits, failing the test and
// killing it if it has not stopped after 10 s.
func (c *Child) Stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		c.t.Errorf("%s did not stop on SIGTERM within 10 s; killing it", c.name)
		c.Kill()
	}
}

// Done is closed when the child has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }
