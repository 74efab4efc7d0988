package orphan

import "maps"

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

// VolumeReads collects what a host read of the volumes a cycle asks
// about and gives Cycle.Volumes and Cycle.VolumesComplete from it. Make
// one with NewVolumeReads of the wanted names (VolumesAsked), then, for
// each volume read, call Read with its state (present; "" when the host
// read it but cannot state it: unknown to the guard) or Absent (the host
// knows it does not exist: NotFound, a deletion seen, or missing from a
// list that holds every volume). A wanted volume that got neither was not
// read, and States is then incomplete.
//
// The zero value wants nothing and is never complete. It is not safe for
// concurrent use.
type VolumeReads struct {
	wanted map[string]bool
	states map[string]VolumeState
	absent map[string]bool
}

// NewVolumeReads returns a VolumeReads for the volumes wanted.
func NewVolumeReads(wanted map[string]bool) *VolumeReads {
	w := make(map[string]bool, len(wanted))
	for n, ok := range wanted {
		if ok {
			w[n] = true
		}
	}
	return &VolumeReads{wanted: w, states: map[string]VolumeState{}, absent: map[string]bool{}}
}

// Read records that the volume name exists with state. A volume read
// present is present, whatever Absent says of it: deleted is the state
// that lets the most through the guard, so it needs the absence of every
// sign of the volume. A name that is not wanted is kept all the same (a
// state the guard never asks about costs nothing; one it asks about and
// lacks would be deleted).
func (v *VolumeReads) Read(name string, state VolumeState) {
	if v.states == nil {
		v.states = map[string]VolumeState{}
	}
	v.states[name] = state
}

// Absent records that the volume name does not exist.
func (v *VolumeReads) Absent(name string) {
	if v.absent == nil {
		v.absent = map[string]bool{}
	}
	v.absent[name] = true
}

// States returns Cycle.Volumes (a copy of the states read; an absent
// volume is left out) and Cycle.VolumesComplete: true only when every
// wanted volume was read, present or absent, and the VolumeReads was made
// by NewVolumeReads. Incomplete, a volume left out is unknown to the
// guard, never deleted, and the states read still count.
func (v *VolumeReads) States() (map[string]VolumeState, bool) {
	out := make(map[string]VolumeState, len(v.states))
	maps.Copy(out, v.states)
	complete := v.wanted != nil
	for n := range v.wanted {
		if _, ok := v.states[n]; !ok && !v.absent[n] {
			complete = false
			break
		}
	}
	return out, complete
}
