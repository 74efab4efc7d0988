// Package cleanupctrl is a controller-runtime controller that runs a
// ScyllaDB cluster's cleanups the way scylla-operator does (a cleanup Job
// per node, annotated with the token ring hash it cleans for, and the
// node's member Service annotated with the last hash cleaned up), with
// caretaker's rules on top: which nodes need a cleanup comes from the
// ownership analysis (tokenring.Baselines), not from the hash alone, and
// the Jobs start wave by wave (tokenring.Scheduler), never two replicas of
// one range at once.
//
// # What it reads
//
//   - The ScyllaCluster (group scylla.scylladb.com, version v1): only
//     metadata.generation, status.observedGeneration and status.conditions.
//     A cleanup starts only while the cluster is stable, with the
//     preconditions scylla-operator's cleanup controller uses
//     (tokenring.Decide): the status observed the current generation,
//     StatefulSetControllerProgressing is not True, Available is True and
//     Degraded is False. The status is read at the start of each pass and
//     again right before each Job is created, with the nodes the Job's
//     node sees joining, leaving, moving or down (none may be); a Job
//     already created runs whatever the cluster becomes.
//   - The member Services, labelled scylla/cluster=<name> and
//     scylla-operator.scylladb.com/scylla-service-type=member, with
//     scylla/datacenter and scylla/rack, and the annotations
//     internal.scylla-operator.scylladb.com/current-token-ring-hash (the
//     node's sidecar writes it) and .../last-cleaned-up-token-ring-hash
//     (this controller writes it, seeded NeverCleanedUp).
//   - Each node's REST API (Config.APIURL of Config.EndpointOf the
//     Service): the ring, each keyspace's replica placement
//     (tokenring.ReadTopology: describe_ring), and, after a failed Job,
//     POST /compaction_manager/stop_compaction?type=CLEANUP.
//
// # What it writes
//
//   - A Job "cleanup-<service>" per node that lost ranges, annotated
//     internal.scylla-operator.scylladb.com/cleanup-token-ring-hash, from
//     Config.JobPodSpec.
//   - last-cleaned-up-token-ring-hash on the member Service once the Job
//     succeeded, or without a Job when the node lost no range.
//   - One ConfigMap "<cluster>-caretaker-cleanup": each node's baseline
//     (tokenring.Baselines) and, for each Job, the topology it cleans for
//     (written before the Job is created) and its attempts. With the Jobs
//     themselves it is the whole progress: a restarted controller reads it
//     back and neither cleans a finished node again nor forgets one.
//
// # Where it differs from scylla-operator, and why
//
//   - scylla-operator starts every node's Job in one pass (syncJobs in
//     pkg/controller/scyllacluster/sync_jobs.go); here a Job starts only
//     when tokenring.Scheduler allows it beside the running ones (one rack
//     of a datacenter at a time, at most Config.Limits.MaxPerDatacenter,
//     never two replicas of a range), as scylla-operator#3015 asks.
//   - scylla-operator cleans a node whenever its hash changed, which
//     cleans nodes that only gained ranges and misses replication factor
//     decreases (the ring, and so the hash, does not change). Here a node
//     is cleaned when tokenring.Baselines.Analyze says it lost ranges.
//   - A failed Job: ScyllaDB goes on cleaning after its client is gone,
//     so before any node that shares a range with it may start, the
//     controller stops the node's cleanups; until a stop succeeds the node
//     counts as cleaning. scylla-operator leaves it to the Job's retries.
//   - The analysis is of the ring the hashes name: a node whose
//     current-token-ring-hash is not the hash of the ring the controller
//     read waits (the ring is changing, or the sidecar is behind).
package cleanupctrl
