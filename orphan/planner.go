package orphan

// Planner is Decide for a driver that plans the same scope cycle after
// cycle: it remembers the record names it computed in its previous cycle,
// so that a steady state (the same items and records, listed in the same
// order) is planned without hashing them again. Its plans are the ones
// Decide(in) makes, for every input and every sequence of inputs; only the
// time to make them differs.
//
// Names are remembered by the whole string Longhorn's formula hashes (the
// name fields, dash-joined and trimmed), never by a hash of it: an item
// whose fields changed, or a record whose name does not match its own
// fields, is named from its fields as Decide names it, and a forged record
// is forgotten as Decide forgets it. A record's name is still checked
// against its own fields every cycle.
//
// Only the previous cycle is remembered: names not asked for in a cycle are
// dropped, so the memory is about twice one cycle's name keys and sums,
// plus working arrays for one cycle (given back when a cycle is much
// smaller than the one they were sized for).
// Items listed in a new order are still found (through an index built for
// that cycle); items never seen before are hashed.
//
// The zero value is ready to use. A Planner is not safe for concurrent
// use, and it starts no goroutines: a driver keeps one per scope it plans
// (a node's) and calls Decide from one goroutine at a time. Plans from
// different inputs (another node's) work too, but are slower, as every
// change of input is.
type Planner struct {
	cands sumMemo // the candidates' names, as decide asks for them
	recs  sumMemo // the names records' own fields give
	sc    scratch // working arrays, lent to each cycle
}

// Decide makes the plan for one cycle, exactly as the function Decide
// does; see it for the rules. The input is not modified, and nothing of
// it is retained but the name keys the Planner copies.
func (p *Planner) Decide(in Input) Plan {
	plan := decide(&in, &sumSource{memo: p}, &p.sc)
	clear(p.sc.facts[:cap(p.sc.facts)]) // they point at this input's scopes, which are not the Planner's to keep
	// Working arrays sized for a much larger input than this one's are
	// given back, as the memo gives back its entries.
	if cap(p.sc.named) > 4*max(len(in.Candidates), 1024) || cap(p.sc.facts) > 4*max(len(in.Records), 1024) {
		p.sc = scratch{}
	}
	return plan
}
