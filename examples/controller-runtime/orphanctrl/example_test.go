package orphanctrl_test

import (
	"context"
	"log"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/caretaker-storage/caretaker/examples/controller-runtime/orphanctrl"
)

// A node's orphan controller in a manager of its own, as a DaemonSet pod
// runs it. It needs a cluster, so it is compiled but not run.
func ExampleSetup() {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 50, 100 // a purge is a handful of requests
	scheme, err := orphanctrl.NewScheme()
	if err != nil {
		log.Fatal(err)
	}
	node := os.Getenv("NODE_NAME")
	// Only this node's Orphans, Longhorn Node and Replicas; Replicas and
	// Volumes stripped to the fields the controller reads.
	local := orphanctrl.NewLocalCache("longhorn-system", node)
	mgr, err := manager.New(cfg, manager.Options{Scheme: scheme, Cache: local.Options()})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := orphanctrl.Setup(mgr, orphanctrl.Config{NodeID: node, Namespace: "longhorn-system", LocalCache: local}); err != nil {
		log.Fatal(err)
	}
	if err := mgr.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}
