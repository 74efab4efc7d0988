package orphan

// Planner is Decide for a driver that plans the same scope cycle after
// cycle: it keeps Decide's working arrays (the candidates' name sums and
// their table, each record's facts, sort keys) from one cycle to the
// next, so a steady state allocates little besides its Plan. Its plans
// are the ones Decide(in) makes, for every input and every sequence of
// inputs. Nothing of an input is kept: every name is computed from its
// item's fields every cycle, and every record's name is checked against
// its own fields, as Decide does.
//
// Arrays sized for a cycle much larger than the current one are given
// back.
//
// The zero value is ready to use. A Planner is not safe for concurrent
// use, and it starts no goroutines: a driver keeps one per scope it plans
// (a node's) and calls Decide from one goroutine at a time.
type Planner struct {
	sc scratch // working arrays, lent to each cycle
}

// Decide makes the plan for one cycle, exactly as the function Decide
// does; see it for the rules. The input is not modified, and nothing of
// it is retained.
func (p *Planner) Decide(in Input) Plan {
	plan := decide(&in, &p.sc)
	clear(p.sc.facts[:cap(p.sc.facts)]) // they point at this input's scopes, which are not the Planner's to keep
	// Working arrays sized for a much larger input than this one's are
	// given back.
	if cap(p.sc.named) > 4*max(len(in.Candidates), 1024) || cap(p.sc.facts) > 4*max(len(in.Records), 1024) {
		p.sc = scratch{}
	}
	return plan
}
