package backupdelete

// GateResult is the creation gate's answer for a new backup.
type GateResult struct {
	// Wait: keep the new backup Pending with Message and look again
	// later; do not start the backup.
	Wait bool
	// Blocker is the backup being deleted that the new one waits for.
	Blocker BackupRef
	// Message is "Wait for backup <name> to be deleted" when Wait.
	Message string
}

// CreationGate decides whether a new backup of a volume may start, given the
// host's other backups. It waits while another backup of the same volume on
// the same target is Deleting: that backup's command holds, or is about to
// take, the backupstore's deletion lock, and a creation that ran into it
// would fail at once (longhorn/longhorn#8742, the complaint behind #8746). A backup in Error does
// not block: its command has returned and holds no lock.
//
// When several block, the blocker is the one with the smallest name, so the
// message is stable between reconciles. CreationGate is pure.
func CreationGate(newBackup BackupRef, others []Backup) GateResult {
	var blocker *BackupRef
	for i := range others {
		o := &others[i].Ref
		if others[i].State != StateDeleting || o.Target != newBackup.Target || o.Volume != newBackup.Volume || o.Name == newBackup.Name {
			continue
		}
		if blocker == nil || o.Name < blocker.Name {
			blocker = o
		}
	}
	if blocker == nil {
		return GateResult{}
	}
	return GateResult{Wait: true, Blocker: *blocker, Message: WaitForDeletionMessage(blocker.Name)}
}
