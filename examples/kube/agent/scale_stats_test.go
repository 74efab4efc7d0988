package agent_test

// What the scale test reads of an agent through its Stats. (On a tree
// whose agent has no Stats, these return -1 and the checks that need
// them are skipped: the heap and request checks stand alone.)

// cachedObjects is the number of objects an agent holds.
func cachedObjects(s *simAgent) int {
	st := s.a.Stats()
	return st.Nodes + st.Replicas + st.Volumes + st.Orphans
}

// sweepsOf is the number of sweeps an agent ran.
func sweepsOf(s *simAgent) int64 { return s.a.Stats().Sweeps }
