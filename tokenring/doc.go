// Package tokenring decides when a ScyllaDB node needs a cleanup after the
// cluster changed, compatibly with scylla-operator, and better than it when
// the host asks: it can tell the nodes that lost token ranges (their disks
// hold stale data that may resurrect) from those that only gained some.
//
// # In short
//
// To read a node you implement nothing: NewClient(url, ClientOptions{})
// speaks ScyllaDB's REST API (directly or through the Manager Agent).
// ReadTokenRingHash gives the hash scylla-operator annotates each node
// with, and Decide turns a member's annotations and the cluster's status
// into a Decision, as scylla-operator does. To clean only the nodes that
// lost ranges, save a Topology (ReadRing and your keyspaces'
// Replication) before scaling and call Analyze(before, after) after it:
// NodeChange.NeedsCleanup says who lost ranges. RunCleanup(ctx, client)
// cleans one node, as scylla-operator's cleanup Job does. The
// scylla-cleanup example does all of this from the command line.
//
// # In depth
//
// The package has three layers; a host may use any of them alone.
//
//   - Compatibility: HashTokens computes scylla-operator's token ring hash
//     byte for byte; Decide turns a member's annotations
//     (CurrentTokenRingHashAnnotation, LastCleanedUpTokenRingHashAnnotation,
//     NeverCleanedUp) and the cluster's status into a Decision (seed, wait
//     with a reason, start a cleanup Job, record a cleanup, or nothing);
//     SetJobConditions reports the decisions as JobControllerProgressing and
//     JobControllerDegraded conditions.
//   - Ownership: Analyze compares two Topologies (token ring with each
//     endpoint's datacenter and rack, and each keyspace's replication) and
//     lists per node and keyspace the ranges lost and gained. With
//     DecideOptions{Trigger: TriggerOwnership} the decision uses it: a
//     scale-out cleans only nodes that lost ranges, a decommission cleans
//     nobody who only gained, and a replication factor decrease or strategy
//     change with an unchanged ring cleans the nodes that lost replicas.
//     ReadTopology builds a Topology from the cluster itself: the ring, and
//     for each keyspace the token ring places, the replication that puts
//     every range on exactly the replicas ScyllaDB's describe_ring lists
//     (InferReplication); CheckReplication holds a given replication to
//     the same test. A placement no SimpleStrategy or
//     NetworkTopologyStrategy replication reproduces is
//     ErrReplicationMismatch, never a guess.
//   - Adapters: Client speaks ScyllaDB's REST API, directly
//     (http://host:10000) or through the Scylla Manager Agent
//     (https://host:10001, bearer token), and implements RingSource,
//     LocationSource and Cleaner. ReadTokenRingHash refuses to hash the
//     ring of a node that owns no tokens yet (ErrNotJoined), or a ring
//     reply that lacks the node's own tokens (ErrInconsistentRing).
//     RunCleanup does the cleanup Job's work. Package tokenringtest models
//     a cluster once and serves it as an in-memory node (MemNode) and as a
//     fake REST API (Server), and its RunConformanceTests checks any
//     RingSource, LocationSource or Cleaner in one line; package mocks has
//     generated mocks of the interfaces.
//
// # Scheduling cleanups
//
// Which nodes may clean at the same time is a decision of its own.
// scylla-operator starts the cleanup Jobs of every node that needs one in
// one pass (syncJobs, pkg/controller/scyllacluster/sync_jobs.go);
// scylla-operator#3015 asks for cleanups rack by rack with a limit, and
// two replicas of one range should never compact at once. NewScheduler
// takes the Topology (ring, locations, replication) and ScheduleLimits
// (zero value: at most DefaultMaxPerDatacenter per datacenter, one rack
// of a datacenter at a time); Scheduler.Next says which of the nodes that
// need a cleanup to start beside those running, with a Hold reason for
// each other, and Scheduler.Waves plans them all in waves. Both are pure.
// By default replicas of a range conflict wherever they are, so
// datacenters that replicate each other's data take turns;
// ScheduleLimits.ConflictScope WithinDatacenter lets them clean side by
// side, for clusters whose clients read at LOCAL_QUORUM (see
// ConflictScope).
// CleanupDriver runs Next with RunCleanup on each node's Cleaner, retries
// failures with backoff (a failed node counts as running until its
// cleanups are stopped: ScyllaDB goes on after a lost connection), and
// records done and running nodes in a
// CleanupStateStore so that a restart resumes without overlapping
// replicas (a node recorded as running counts as running until it is
// re-run). CleanupDriverOptions.Precondition is asked right before each
// node's cleanup (ClusterPreconditions checks the cluster status Decide
// checks), so a campaign stops starting cleanups once the cluster starts
// scaling. The scylla-cleanup example's -plan prints the waves.
//
// # What the client trusts
//
// The Manager Agent's bearer token is sent to the base URL's origin over
// TLS and nowhere else: NewClient refuses a token with an http URL
// (ErrTokenWithoutTLS), and the client never follows a redirect
// (ErrRedirect), even when the host's own http.Client would. Go's client
// keeps the Authorization header on a redirect to the same host name on
// another port or scheme, so following one would send the token in clear.
//
// A reply counts only for what it proves. JSON null, where the API always
// answers a value, is ErrMalformedReply, never "nothing". A cleanup is
// done only when ScyllaDB answers HTTP 200 with 0 (the reply of
// force_keyspace_cleanup in ScyllaDB's api/storage_service.cc). A keyspace
// is gone only when ScyllaDB answers HTTP 400 with exactly the message its
// validate_keyspace throws for that keyspace: "Can't find a keyspace
// <name>" (replica::no_such_keyspace, current releases) or "Keyspace
// <name> Does not exist" (older ones); RunCleanup then reports it
// Dropped, not Cleaned. A 404 means the path is not served (an old
// version, a proxy), never that the keyspace is gone: it fails the
// keyspace. (An earlier version of this package took any 400 mentioning
// "does not exist", and any 404, as "dropped": that was a guess, and
// today's message does not even say "does not exist".)
//
// Decide, Analyze, HashTokens and SetJobConditions are pure: no I/O, no
// goroutines, no clock (time comes in as an argument).
//
// # Host duties
//
//  1. On each node (the sidecar): call ReadTokenRingHash and write the hash
//     to the member Service's CurrentTokenRingHashAnnotation. On ErrNotJoined
//     leave the annotation as it is and ask again later.
//  2. In the cluster reconcile loop: for every member build a Member (its
//     Service annotations, its cleanup Job if any, its endpoint) and a
//     ClusterStatus, and call Decide.
//  3. Apply each Decision: ActionSeed → set LastCleanedUpTokenRingHashAnnotation
//     to NeverCleanedUp; ActionStartCleanup → create (or replace) the node's
//     cleanup Job with CleanupJobTokenRingHashAnnotation = TokenRingHash, its
//     pod calling RunCleanup against that node; ActionRecordCleanup → set
//     LastCleanedUpTokenRingHashAnnotation to TokenRingHash; ActionWait →
//     requeue; ActionNone → nothing.
//  4. Call SetJobConditions on the cluster's status conditions and write the
//     status when it reports a change.
//  5. Only for TriggerOwnership: keep, per node, a baseline Topology (the
//     ring and the vnode keyspaces' replication when the node was last
//     cleaned, or when it joined). The Baselines record does this for you:
//     each reconcile read the current ring (ReadRing) and replication,
//     call Baselines.Observe(now) and save the record, then
//     Baselines.Analyze(now), and pass the result in
//     DecideOptions.Analysis. When you apply ActionRecordCleanup, call
//     Baselines.RecordCleanup(node, now); otherwise a replication change
//     keeps asking for cleanups. Never keep a topology that fails
//     Topology.Validate: a replication that does not match the ring (a
//     datacenter it does not have, no replicas at all) would make every
//     node look as if it lost its ranges, so Analyze refuses it with
//     ErrUnknownDatacenter or ErrInvalidReplication.
//
// # Cleanup after provisioning
//
// A cluster's first provisioning adds nodes one after another: each join
// takes ranges from the nodes already there, and whatever those nodes
// wrote for them stays on their disks. scylla-operator first sets a
// node's baseline, its last-cleaned-up ring hash, to the node's current
// ring hash the first time its member Service carries one (MemberService in
// pkg/controller/scylladbdatacenter/resource.go); during provisioning
// that is usually after the later nodes joined, so no cleanup ever runs
// (scylla-operator#3102; a later decommission then waits for ScyllaDB's
// own slow cleanup). Decide's TriggerHash starts from NeverCleanedUp
// instead and so cleans every node, the last one included; TriggerOwnership
// needs per-node baselines.
//
// Baselines fixes it as data. Observe gives a node its baseline when it
// is first seen in the ring: the topology it joined, so the nodes that
// were there before it keep older baselines and Analyze finds what they
// lost to it. While the cluster holds no data (DataPresence; by default
// HoldsData: any keyspace that is not LocalStrategy, replicated system
// keyspaces included), every baseline simply follows the ring: nothing
// can be left behind. A node that lost nothing since its baseline moves
// on to the observed topology. A keyspace created after a node's baseline is
// compared from that baseline, not skipped as new: data written after
// the first node started and before the others joined is left behind
// too. The host's duty is to call Observe before each node starts to
// join; when it cannot (it started late), ObserveOptions.JoinOrder
// rebuilds the ring each node joined from the order the host knows
// (StatefulSet ordinals), and without it each node first seen with
// others is taken to have joined first: an extra cleanup, never a
// missed one.
//
// # A complete loop
//
//	func reconcile(ctx context.Context, cluster *Cluster, now time.Time) error {
//		analysis, err := tokenring.Analyze(cluster.Baseline, cluster.ObserveTopology(ctx))
//		if err != nil {
//			return err // a bad ring or replication is reported, never guessed
//		}
//		opts := tokenring.DecideOptions{Trigger: tokenring.TriggerOwnership, Analysis: &analysis}
//		var decisions []tokenring.Decision
//		for _, svc := range cluster.MemberServices() {
//			d := tokenring.Decide(tokenring.Member{
//				Name:        svc.Name,
//				Annotations: svc.Annotations,
//				Job:         cluster.CleanupJob(svc.Name), // nil when there is none
//				Endpoint:    svc.Endpoint,
//			}, cluster.Status(), opts)
//			switch d.Action {
//			case tokenring.ActionSeed, tokenring.ActionRecordCleanup:
//				svc.Annotations[tokenring.LastCleanedUpTokenRingHashAnnotation] = d.TokenRingHash
//				if d.Action == tokenring.ActionRecordCleanup {
//					cluster.AdvanceBaseline(svc.Endpoint)
//				}
//			case tokenring.ActionStartCleanup:
//				cluster.EnsureCleanupJob(svc.Name, d.TokenRingHash) // runs tokenring.RunCleanup
//			}
//			decisions = append(decisions, d)
//		}
//		if tokenring.SetJobConditions(&cluster.Conditions, decisions, cluster.Generation, metav1.NewTime(now)) {
//			return cluster.UpdateStatus(ctx)
//		}
//		return nil
//	}
//
// # Errors
//
// Sentinels for errors.Is: ErrNotMurmur3 (every *TokenError: a token that is
// not a canonical signed 64-bit decimal), ErrInvalidRing,
// ErrInvalidReplication, ErrUnknownDatacenter and ErrMissingLocation
// (Topology.Validate and Analyze's input), ErrNoBaseline and
// ErrInvalidBaselines (Baselines),
// ErrNotJoined and ErrInconsistentRing (retry later), ErrNotFound (HTTP
// 404; caretaker's shared NotFound class), ErrKeyspaceNotFound (ScyllaDB said the keyspace does not exist),
// ErrRedirect, ErrMalformedReply and ErrTooLarge (REST replies, the
// shared "too large" class; bodies are read up to ClientOptions.MaxReplyBytes, and an oversized one wraps
// a *bounded.TooLargeError), ErrInvalidURL and
// ErrTokenWithoutTLS (NewClient's configuration). ErrMalformedReply and
// ErrRedirect are of the library's shared malformed-input and redirect
// classes: errors.Is matches them with every other package's sentinel of
// the same class (diskscan.ErrCorrupt, ...), and an *APIError of HTTP 3xx
// matches every redirect sentinel. Every error text starts with
// "tokenring: ". NewCleanupDriver without a Scheduler, CleanerFor or Store
// wraps ErrInvalidOptions. Non-2xx replies are
// *APIError. IsRetryable classifies any error of this package. RunCleanup
// continues past failing keyspaces and returns them all in a
// *multierror.Error and in its report.
// NewScheduler refuses a ring without tokens (ErrInvalidRing), an
// endpoint without a datacenter and rack (ErrMissingLocation) and
// negative limits (ErrInvalidLimits); Next, Waves and CleanupDriver.Run
// refuse endpoints outside the ring (ErrUnknownEndpoint). An attempt
// whose report does not prove every keyspace cleaned wraps
// ErrCleanupNotProven and is never recorded done.
// Decide never fails: an annotation it cannot trust becomes a wait with
// ReasonUnexpectedServiceState and a Degraded condition, never a Job.
//
// # Concurrency
//
// The pure functions are safe to call concurrently on inputs nobody
// mutates. Client is safe for concurrent use and starts no goroutines of its
// own; every call takes a context first and honours it. RunCleanup runs on
// the caller's goroutine, one call per node.
package tokenring
