package s3test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// setDeathSignal has the kernel kill the server when the test process
// dies, so that a test binary ending without Main leaves no server behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }

// removeStale removes shared-server directories left by test processes
// that have ended without Main.
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "caretaker-s3test-*-*"))
	for _, d := range dirs {
		rest := strings.TrimPrefix(filepath.Base(d), "caretaker-s3test-")
		pid, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, '-'), 0)])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(d)
		}
	}
}
