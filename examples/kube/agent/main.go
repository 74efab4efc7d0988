package agent

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/examples/kube/metrics"
	"github.com/caretaker-storage/caretaker/examples/kube/nodecache"
	"github.com/caretaker-storage/caretaker/orphan"
)

// Main is the orphan-agent program: it parses args (without the program
// name), runs an Agent until ctx is done, and returns the exit code.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("orphan-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		kubeconfig = fs.String("kubeconfig", "", "kubeconfig file; empty means the in-cluster config")
		namespace  = fs.String("namespace", crstore.DefaultNamespace, "namespace of Longhorn's objects")
		node       = fs.String("node", os.Getenv("NODE_NAME"), "this node's Longhorn node name (default $NODE_NAME)")
		period     = fs.Duration("period", orphan.DefaultPeriod, "disk scan period")
		autoDelete = fs.String("auto-delete", "", "Longhorn's "+orphan.SettingAutoDeletion+" setting, e.g. replica-data")
		logLevel   = fs.String("log-level", "info", "debug, info, warn or error")
		grace      = fs.String("grace-period", "", "Longhorn's "+orphan.SettingGracePeriod+" setting, in seconds (default "+strconv.Itoa(int(orphan.DefaultGracePeriod.Seconds()))+")")
		metricsAt  = fs.String("metrics-addr", "", "serve Prometheus metrics at /metrics on this address, e.g. :9500; empty: no metrics")
		spread     = fs.Duration("first-confirm-spread", 0, "spread a whole cluster's first full lists of the Replicas over this window: wait the node's share of it (drawn from its name) after the start; 0: no wait")
	)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: orphan-agent -node NAME [flags]\n\nKeeps the node's Longhorn Orphan resources in step with its disks; purges a\nreplica directory when its Orphan is deleted.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "orphan-agent: -log-level: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if *node == "" {
		log.Error("-node (or $NODE_NAME) is required")
		return 2
	}
	policy, err := orphan.ParsePolicy(*autoDelete, *grace)
	if err != nil {
		log.Error("bad auto-deletion settings", "err", err)
		return 2
	}
	var hooks orphan.Hooks
	if *metricsAt != "" {
		m, stop, err := metrics.Serve(*metricsAt, log)
		if err != nil {
			log.Error("cannot serve metrics", "addr", *metricsAt, "err", err)
			return 1
		}
		defer stop()
		hooks = m.Orphan()
	}
	var cfg *rest.Config
	if *kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		log.Error("no API server configuration", "err", err)
		return 1
	}
	cfg.UserAgent = "caretaker-orphan-agent/" + *node
	// client-go's default of 5 requests a second makes a purge of a few
	// orphans wait on the client's rate limiter.
	cfg.QPS, cfg.Burst = 50, 100
	// Longhorn's finalizer "longhorn.io" draws a warning on every write.
	cfg.WarningHandler = rest.NewWarningWriter(stderr, rest.WarningWriterOptions{Deduplicate: true})
	// When every agent of a cluster starts at once (a reboot, an API server
	// outage that dropped every watch), priority and fairness sheds load
	// with 429s: wait what they say, plus jitter, so the agents come back
	// spread out rather than together.
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &nodecache.Backoff429{Next: rt} })
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		log.Error("client", "err", err)
		return 1
	}
	a, err := New(Config{Client: client, Namespace: *namespace, NodeID: *node, Period: *period, Policy: policy, Logger: log, Hooks: hooks, FirstConfirmSpread: *spread})
	if err != nil {
		log.Error("agent", "err", err)
		return 2
	}
	if err := a.Run(ctx); err != nil {
		log.Error("agent stopped", "err", err)
		return 1
	}
	log.Info("agent stopped")
	return 0
}
