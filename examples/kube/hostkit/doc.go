// Package hostkit holds what both Kubernetes hosts of caretaker's
// examples need and a host of your own would write the same way: telling
// the host's own writes to its records apart from everyone else's when
// they come back through its watch (Echoes), the delay after failures in a
// row (RetryPolicy), how many records one sweep creates
// (DefaultMaxCreates), and the Sweeper's Store pinned to the list whose
// volumes the host read (Pinned). examples/kube/agent (client-go) and
// examples/controller-runtime/orphanctrl (controller-runtime) both use it.
//
// It imports nothing of Kubernetes: a write is known by the object's name
// and the resourceVersion the API server answered it with, and Pinned
// wraps any orphan.Store.
package hostkit

// DefaultMaxCreates is the orphan.SweeperOptions.MaxCreates both example
// hosts use unless configured otherwise: at two writes per Orphan (the
// create, then its status: the Orphan CRD has a status subresource, so the
// API server drops a status sent with the create), a batch is about 200
// writes, a few seconds. A node that suddenly has thousands of orphans
// creates them in batches, sweep after sweep, and a user's deletion is
// carried out by the next sweep instead of after the whole backlog.
const DefaultMaxCreates = 100
