// Package rebuildtest provides an in-memory cluster that implements
// rebuild.VolumeSource and rebuild.TicketStore, with a small attachment
// controller and volume controller, and a Sim that drives it together with
// a rebuild.Driver on a fake clock. Tests, examples and hosts' own tests use
// it to watch offline rebuilding happen without Kubernetes.
//
// RunConformanceTests is the conformance suite for every interface package
// rebuild asks hosts to implement: a host runs it against its own
// implementations in one line, and the Cluster (alone, and inside a Sim)
// passes it.
package rebuildtest
