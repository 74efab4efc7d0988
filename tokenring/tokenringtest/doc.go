// Package tokenringtest models a ScyllaDB cluster once, as one node sees it
// (Cluster), and offers it to tests two ways:
//
//   - MemNode, an in-memory node implementing tokenring.RingSource,
//     tokenring.LocationSource and tokenring.Cleaner directly;
//   - Server, a fake ScyllaDB REST API on net/http/httptest that serves a
//     MemNode in ScyllaDB's wire format (the JSON shapes, error bodies and
//     status codes of api/storage_service.cc), for tests of
//     tokenring.Client and of code that talks HTTP. With
//     ServerOptions.AuthToken it plays the Scylla Manager Agent: TLS and a
//     bearer token. It listens on 127.0.0.1 only.
//   - MgmtServer, a fake Management API for Apache Cassandra (k8ssandra's
//     management-api, which cass-operator runs beside each Cassandra
//     node): keyspace listing and replication, the asynchronous keyspace
//     cleanup and its job status, with jobs that take time, fail, or
//     vanish, for tests of package mgmtapi's Cleaner.
//
// RunConformanceTests is the conformance suite for every interface package
// tokenring asks hosts to implement: a host with another path to the node
// (a sidecar, a CQL session) runs it against its own implementation in one
// line, and both MemNode and tokenring.Client (over a Server) pass it.
//
// All types are safe for concurrent use, also while a Server handles
// requests.
package tokenringtest
