package orphan

// sumSource gives decide the name sums of candidates and records. The
// zero value hashes every item (Item.nameSum), which is Decide's; a
// Planner's gives the sums it remembers from earlier cycles.
//
// decide asks in a fixed order: the candidates that need a name in input
// order, between startCandidates and endCandidates, then the records of
// a Ready scope with a canonical name in input order, between
// startRecords and endRecords.
type sumSource struct{}

func (s *sumSource) startCandidates() {}
func (s *sumSource) endCandidates()   {}
func (s *sumSource) startRecords()    {}
func (s *sumSource) endRecords()      {}

// candidate is the sum of it, whose kind's spec is spec (nil for a kind
// the table does not hold).
func (s *sumSource) candidate(spec *KindSpec, it *Item) (nameSum, error) {
	return it.nameSumOf(spec)
}

// record is the sum r's own fields give.
func (s *sumSource) record(r *Record) (nameSum, error) {
	return r.Item().nameSum()
}
