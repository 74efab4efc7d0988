package diskscan

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/caretaker-storage/caretaker/orphan"
)

// A disk is the disk the host means only if its filesystem ID and its
// config's UUID are the ones expected, and no other disk of its node is
// on the same filesystem. Scans report a disk that fails these checks as
// DiskChanged or DiskInvalid; purges refuse on it.

// identity is what checkIdentity found.
type identity struct {
	root *os.Root
	fsid string
	cfg  DiskConfig
}

// checkIdentity opens d's path and checks that its filesystem ID is the
// expected one (if one is known) and that its config names d's UUID. The
// filesystem ID and the config are read through the same open directory,
// so both are of the same filesystem. Errors wrap ErrDiskChanged,
// ErrDiskInvalid, or are I/O errors.
func (o *Orphans) checkIdentity(d Disk) (identity, error) {
	var id identity
	root, err := o.host.openRoot(d.fsPath())
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return id, fmt.Errorf("%w: disk path does not exist", ErrDiskInvalid)
		}
		return id, fmt.Errorf("open disk path: %w", err)
	}
	id.root = root
	self, err := root.Open(".")
	if err != nil {
		return id, fmt.Errorf("open disk path: %w", err)
	}
	id.fsid, err = fsidOf(self)
	self.Close()
	if err != nil {
		return id, err
	}
	if want := o.disks.expectedFSID(d); want != "" && want != id.fsid {
		return id, fmt.Errorf("%w: filesystem ID is %s, expected %s: another filesystem is mounted at the disk path", ErrDiskChanged, id.fsid, want)
	}
	f, err := openRegular(root, ConfigFile, ConfigFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return id, fmt.Errorf("%w: no %s", ErrDiskInvalid, ConfigFile)
		}
		if errors.Is(err, ErrNotRegular) {
			return id, fmt.Errorf("%w: %v", ErrDiskInvalid, err)
		}
		return id, fmt.Errorf("open %s: %w", ConfigFile, err)
	}
	id.cfg, err = ReadDiskConfig(f, o.opts.MaxConfigSize)
	f.Close()
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			return id, fmt.Errorf("%w: %v", ErrDiskInvalid, err)
		}
		return id, err
	}
	if id.cfg.DiskUUID != d.UUID {
		return id, fmt.Errorf("%w: %s has diskUUID %s, expected %s", ErrDiskChanged, ConfigFile, id.cfg.DiskUUID, d.UUID)
	}
	return id, nil
}

// statusOf maps a checkIdentity error to a scope status.
func statusOf(err error) orphan.ScopeStatus {
	switch {
	case errors.Is(err, ErrDiskChanged):
		return orphan.ScopeStatus{Health: orphan.HealthDiskChanged, Message: err.Error()}
	case errors.Is(err, ErrDiskInvalid):
		return orphan.ScopeStatus{Health: orphan.HealthDiskInvalid, Message: err.Error()}
	}
	return orphan.ScopeStatus{Health: orphan.HealthUnknown, Message: err.Error()}
}

// markSharedFilesystems makes every disk that shares its filesystem ID
// with another disk of its node DiskInvalid: Longhorn cannot tell such
// disks apart, so neither's directories can be trusted to be its own.
func markSharedFilesystems(reps []DiskReport) {
	type key struct{ node, fsid string }
	byFS := map[key][]int{}
	for i, r := range reps {
		if r.FSID != "" {
			k := key{r.Disk.NodeID, r.FSID}
			byFS[k] = append(byFS[k], i)
		}
	}
	for k, idx := range byFS {
		if len(idx) < 2 {
			continue
		}
		for _, i := range idx {
			var others []string
			for _, j := range idx {
				if j != i {
					others = append(others, reps[j].Disk.Name)
				}
			}
			reps[i].Status = orphan.ScopeStatus{
				Health:  orphan.HealthDiskInvalid,
				Message: fmt.Sprintf("%v: filesystem %s is shared with disk %s of node %s; neither disk is trusted", ErrDiskInvalid, k.fsid, strings.Join(others, ", "), k.node),
			}
		}
	}
}

// openChecked opens the disk and checks its identity as a purge needs it:
// a known, unchanged filesystem ID not shared with another disk of the
// node, and the config's UUID. Refusals wrap orphan.ErrPreconditionFailed.
func (o *Orphans) openChecked(disk Disk) (*os.Root, error) {
	if o.disks.expectedFSID(disk) == "" {
		return nil, refuse(ErrDiskChanged, "filesystem ID of disk %s is not known: set Disk.FSID or scan the disk first", disk.Scope())
	}
	id, err := o.checkIdentity(disk)
	if err != nil {
		if id.root != nil {
			id.root.Close()
		}
		if errors.Is(err, ErrDiskChanged) {
			return nil, refuse(ErrDiskChanged, "disk %s: %v", disk.Scope(), err)
		}
		if errors.Is(err, ErrDiskInvalid) {
			return nil, refuse(ErrDiskInvalid, "disk %s: %v", disk.Scope(), err)
		}
		return nil, err
	}
	for _, other := range o.disks.list() {
		if other.NodeID != disk.NodeID || other.Name == disk.Name {
			continue
		}
		if fsid, err := o.host.fsid(other.fsPath()); err == nil && fsid == id.fsid {
			id.root.Close()
			return nil, refuse(ErrDiskInvalid, "disk %s shares filesystem %s with disk %s", disk.Scope(), fsid, other.Name)
		}
	}
	return id.root, nil
}
