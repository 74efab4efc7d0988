// Package deploy holds the manifests that run the orphan agent on a
// cluster: its RBAC (rbac.yaml) and a DaemonSet (daemonset.yaml). The
// tests run the agent with exactly these RBAC rules and check the
// DaemonSet with a server-side dry run.
package deploy

import _ "embed"

var (
	// RBAC is rbac.yaml: the ServiceAccount, Role and RoleBinding.
	//
	//go:embed rbac.yaml
	RBAC []byte

	// DaemonSet is daemonset.yaml.
	//
	//go:embed daemonset.yaml
	DaemonSet []byte
)
