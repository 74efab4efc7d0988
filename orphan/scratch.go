package orphan

// scratch is the working memory decide builds and drops before it
// returns: the named candidates, the sum table, the records' facts, sort
// keys. A Planner lends the same scratch to each of its cycles, so a
// steady state allocates little besides its Plan; Decide gives each call
// a new one. Nothing in a Plan points into it.
type scratch struct {
	named   []namedCandidate
	slots   []sumSlot
	facts   []recordFacts
	parsed  []nameSum
	keys    []sortKey // the records' sort keys, then the new records'
	tmp     []sortKey // the radix sort's second array
	order   []int
	creates []int32
	msg     []byte // ConditionRecoverable's message, spelled to compare
}

// take returns n zero values: *buf's array when it has room, else a new
// one, which *buf keeps for the next cycle.
func take[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n)
		return *buf
	}
	s := (*buf)[:n]
	clear(s)
	return s
}

// room returns an empty slice with room for n: *buf's array when it has
// room, else a new one, which *buf keeps for the next cycle.
func room[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, 0, n)
	}
	return (*buf)[:0]
}
