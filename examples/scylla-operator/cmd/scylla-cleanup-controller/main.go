// Command scylla-cleanup-controller runs cleanupctrl for one ScyllaCluster:
// cleanup Jobs in scylla-operator's shape, started wave by wave for the
// nodes that lost ranges.
//
//	scylla-cleanup-controller -namespace scylla -cluster basic -image registry.example.com/scylla-cleanup:v1
//
// It reaches the API server as controller-runtime does (-kubeconfig,
// $KUBECONFIG, or in-cluster), and each node's REST API at
// http://<member Service ClusterIP>:10000.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/caretaker-storage/caretaker/examples/scylla-operator/cleanupctrl"
	"github.com/caretaker-storage/caretaker/tokenring"
)

func main() {
	var cfg cleanupctrl.Config
	flag.StringVar(&cfg.Namespace, "namespace", "", "the ScyllaCluster's namespace (required)")
	flag.StringVar(&cfg.Cluster, "cluster", "", "the ScyllaCluster's name (required)")
	flag.StringVar(&cfg.Image, "image", "", "image of the cleanup Jobs: scylla-cleanup, run as -api URL -run-cleanup -yes (required)")
	maxPerDC := flag.Int("max-per-dc", 0, fmt.Sprintf("most cleanups at once per datacenter (0: %d)", tokenring.DefaultMaxPerDatacenter))
	racksTogether := flag.Bool("racks-together", false, "let several racks of a datacenter clean at once (still never two replicas of a range)")
	flag.Parse()
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil)))
	cfg.Limits = tokenring.ScheduleLimits{MaxPerDatacenter: *maxPerDC, RacksTogether: *racksTogether}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "scylla-cleanup-controller:", err)
		os.Exit(1)
	}
}

func run(cfg cleanupctrl.Config) error {
	if cfg.Namespace == "" || cfg.Cluster == "" || cfg.Image == "" {
		return fmt.Errorf("-namespace, -cluster and -image are required")
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	mgr, err := manager.New(restCfg, manager.Options{
		Scheme: scheme,
		// Only the cluster's namespace is cached (and watched).
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{cfg.Namespace: {}}},
		// Two controllers of one cluster would each see the other's new
		// Jobs late and could start neighbours together: one leads.
		LeaderElection:          true,
		LeaderElectionID:        "scylla-cleanup-" + cfg.Cluster,
		LeaderElectionNamespace: cfg.Namespace,
	})
	if err != nil {
		return err
	}
	if _, err := cleanupctrl.Setup(mgr, cfg); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
