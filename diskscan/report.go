package diskscan

import "github.com/caretaker-storage/caretaker/orphan"

// Report is what one scan of the disks saw, richer than the Snapshot the
// orphan package consumes: per-disk details, metas and sizes.
type Report struct {
	Disks []DiskReport // sorted by node and disk name
}

// DiskReport is one disk's part of a Report.
type DiskReport struct {
	Disk   Disk
	Status orphan.ScopeStatus
	FSID   string     // the filesystem ID seen, if statfs succeeded
	Config DiskConfig // the config read, if it parsed

	Entries    int      // entries in <disk>/replicas
	Owned      int      // replica directories the cluster expects
	OwnedNames []string // with Options.ListOwned, sorted
	// Orphans are the valid replica directories no replica expected at
	// scan time, sorted by name. They become orphan.Items.
	Orphans []OrphanDir
	// Skipped are entries that are not replica directories, with why.
	Skipped []orphan.Skipped
	// OrphanBytes is the sum of the orphans' AllocatedBytes (those whose
	// size is known).
	OrphanBytes int64
}

// OrphanDir is a valid replica directory that no replica expects.
type OrphanDir struct {
	Name string
	Item orphan.Item
	Meta VolumeMeta
	// AllocatedBytes is the space its regular files occupy (st_blocks ×
	// 512, so a sparse image counts only its written blocks). It is
	// computed when the directory is first seen or has changed (a file
	// created, removed or renamed in it); writes into an existing file do
	// not refresh it. Files that cannot be read are left out, and so is
	// whatever lies on another filesystem or mount inside it.
	AllocatedBytes int64
	// SizeUnknown says why AllocatedBytes is not known, and is "" when it
	// is: the walk summing it stopped at Options.MaxWalkEntries entries
	// (AllocatedBytes is then 0, and not in DiskReport.OrphanBytes). A
	// directory with anything deeper than MaxWalkDepth levels is not an
	// orphan but skipped, with the reason.
	SizeUnknown string
}

// Snapshot converts the report to the orphan package's Snapshot: the
// orphans as items, each disk's scope health, and the skipped entries.
func (r Report) Snapshot() orphan.Snapshot {
	s := orphan.Snapshot{Scopes: make(map[orphan.Scope]orphan.ScopeStatus, len(r.Disks))}
	for _, d := range r.Disks {
		s.Scopes[d.Disk.Scope()] = d.Status
		for _, o := range d.Orphans {
			s.Items = append(s.Items, o.Item)
		}
		s.Skipped = append(s.Skipped, d.Skipped...)
	}
	return s
}

// LastReport returns the report of the last completed scan (the zero
// Report before the first), so a host that runs the scans under
// orphan.Monitor can show sizes without scanning again. The Report is the
// caller's to keep but must not be modified.
func (o *Orphans) LastReport() Report {
	o.lastMu.Lock()
	defer o.lastMu.Unlock()
	return o.last
}
