// Command orphan-agent runs caretaker's per-node orphan agent for Longhorn
// v1 disks: one per node (a DaemonSet), with the node's disks mounted at
// the paths Longhorn's Node object names. See the example's README.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/caretaker-storage/caretaker/examples/kube/agent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := agent.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
