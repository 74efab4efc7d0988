// Package instance is Longhorn's judgement of runtime instances (engine
// and replica processes for the v1 data engine; RAID bdevs and head lvols
// for v2) against the Engine and Replica records the cluster keeps. It is
// Longhorn-specific, so it lives beside the adapters rather than in the
// generic orphan core.
//
// # In short
//
// You implement a Lookup (LookupFunc wraps a function) that answers from
// your Engine and Replica records. The one constructor is
// NewJudge(lookup), an orphan.Judge; Verdict(item, view) is the rule
// itself, pure. spdk.NewOrphans uses it for v2 instances; a v1 host joins
// the Judge to its own Inventory and Deleter with orphan.NewAdapter. The
// package Example judges three engines.
//
// # In depth
//
// A host gives a Lookup of its records (an informer cache); NewJudge
// turns it into an orphan.Judge. spdk.NewOrphans uses it for v2
// instances, and a host that lists v1 instances from its instance
// managers assembles its own adapter with orphan.NewAdapter, leaving out
// the runtimes SkipReason names.
//
// Verdict holds the rules, and their deviation from Longhorn's "Orphaned
// V2 Volume Runtime Resource Cleanup" (longhorn/longhorn#10933, its enhancement for cleaning up SPDK
// runtime objects that outlived their records): a v2 replica with any
// record is owned, because its lvols are the volume's data.
//
// # Concurrency
//
// Verdict and SkipReason are pure. A Judge is safe for concurrent use if
// its Lookup is.
package instance
