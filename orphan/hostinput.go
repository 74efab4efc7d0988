package orphan

// VolumesAsked names every volume the last-copy guard can ask about in a
// cycle over snap against recs: for each item, the volume its inspection
// read (Item.Copy.Volume) and the volume its data directory is named after
// (VolumeOfDataName of ParamDataName); for each record, the volume its
// data directory is named after. A host reads the states of exactly these
// volumes into Cycle.Volumes and sets Cycle.VolumesComplete only once it
// has read every one of them (present with its state, or known deleted):
// a volume it left out is then deleted to the guard. Names that cannot be
// told ("") are left out; the guard treats their orphans' volume as
// unknown whatever the host passes.
//
// The set is a superset of what the guard asks: an item whose inspection
// found no data (Copy.NoData) and an item of another kind are outside the
// guard, and naming their volumes only costs the host a read.
func VolumesAsked(snap Snapshot, recs []Record) map[string]bool {
	names := map[string]bool{}
	add := func(n string) {
		if n != "" {
			names[n] = true
		}
	}
	for _, it := range snap.Items {
		if it.Copy != nil {
			add(it.Copy.Volume)
		}
		add(VolumeOfDataName(it.Param(ParamDataName)))
	}
	for _, r := range recs {
		add(VolumeOfDataName(r.Param(ParamDataName)))
	}
	return names
}

// LastCopyOverrides names the records of recs that carry a person's
// last-copy override, the label LabelLastCopyOverride with the value
// LabelValueLastCopyOverride (any other value is no override): what a
// host whose records keep their labels passes as Cycle.LastCopyOverride.
// Read it from the very records the cycle plans with. The override lets
// only a requested purge of a faulted volume's copy through, never an
// automatic one, so a record is purged on it only once it is also deleted.
// It returns nil when no record carries one.
func LastCopyOverrides(recs []Record) map[string]bool {
	var out map[string]bool
	for _, r := range recs {
		if r.Labels[LabelLastCopyOverride] != LabelValueLastCopyOverride {
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[r.Name] = true
	}
	return out
}
