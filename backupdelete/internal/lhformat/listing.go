package lhformat

import (
	"fmt"
	"slices"
)

// This file is the cross-check of a listing of a volume's backups/
// against volume.cfg, which both stores make before they delete anything.
// Longhorn's deletion (deltablock.go DeleteDeltaBlockBackup) takes
// getBackupNamesForVolume's listing as complete: an entry a gateway, a
// cache or a stale NFS directory cache leaves out is a backup whose
// blocks it deletes.

// UnlistedLast returns volume.cfg's LastBackupName when a listing of the
// volume's backups (names, sorted) should hold it and does not: it is
// set, and it is not the backup being deleted (deleting; "" when no
// backup is). Longhorn's backup creation (deltablock.go performBackup)
// names a backup there only after it saved the backup's final cfg, so
// under the deletion lock, which keeps backup creation out, the named
// backup's cfg is complete unless a deletion removed it. The caller then
// looks the cfg up directly, by its name and not through a listing
// (UnlistedLastError): there, it is a listing that lies; gone, a deletion
// (Longhorn's or ours) removed it and died before it rewrote volume.cfg,
// which is a legitimate state.
//
// A LastBackupName that is not a valid backup name can be neither listed
// nor looked up: volume.cfg is corrupt (an error wrapping
// ErrCorrupt), and nothing is deleted until it is repaired.
func UnlistedLast(last, deleting string, names []string) (string, error) {
	if last == "" || last == deleting {
		return "", nil
	}
	if !ValidName(last) {
		return "", Corrupt("volume.cfg", fmt.Errorf("LastBackupName %q is not a valid backup name", last))
	}
	if _, found := slices.BinarySearch(names, last); found {
		return "", nil
	}
	return last, nil
}

// UnlistedLastError is the error for a backup volume.cfg names as its
// last that a direct lookup found while the listing left it out.
func UnlistedLastError(volume, last string, listed int) error {
	return fmt.Errorf("%w: volume %s: backup %s, volume.cfg's LastBackupName, exists but is missing from the listing of backups/ (%d other backups listed): the listing is incomplete (a gateway, proxy or cache, or an NFS client's directory cache, left entries out), and collecting blocks from it would delete blocks the backups it left out reference; nothing was deleted",
		ErrListingInconsistent, volume, last, listed)
}

// PageDisagreement is the error for a listing whose last page held
// exactly the page size and was marked complete, and whose listing again
// in smaller pages found other names.
func PageDisagreement(volume string, pageSize, first, again int) error {
	return fmt.Errorf("%w: volume %s: the listing of backups/ ended on a full page of %d keys marked complete, and listed again in other pages it holds %d backups instead of %d: a gateway, proxy or cache cuts listings short, and collecting blocks from them would delete blocks the backups it hides reference; no block was deleted",
		ErrListingInconsistent, volume, pageSize, again, first)
}

// ListingCut is the error for a listing of backups/ that ended, marked
// complete, at key last while a listing of the keys after last finds
// next: a gateway, proxy or cache cut it short below the page size.
func ListingCut(volume, last, next string) error {
	return fmt.Errorf("%w: volume %s: the listing of backups/ ended, marked complete, at %s, and a listing of the keys after it finds %s: a gateway, proxy or cache cuts listings short, and collecting blocks from them would delete blocks the backups it hides reference; nothing was deleted",
		ErrListingInconsistent, volume, last, next)
}
