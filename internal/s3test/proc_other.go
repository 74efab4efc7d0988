//go:build !linux

package s3test

import (
	"os"
	"os/exec"
)

func setDeathSignal(*exec.Cmd) {}

func terminate(p *os.Process) error { return p.Signal(os.Interrupt) }

func removeStale() {}
