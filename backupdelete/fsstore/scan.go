package fsstore

import "encoding/json"

// backupRefs is what block collection needs of a backup cfg.
type backupRefs struct {
	createdTime       string
	snapshotCreatedAt string
	checksums         []string
}

// scanBackup reads the fields block collection needs from a backup cfg,
// with the same validation as ParseBackup.
func scanBackup(data []byte) (backupRefs, error) {
	var j struct {
		Name              string
		VolumeName        string
		SnapshotCreatedAt string
		CreatedTime       string
		Blocks            []BlockMapping
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return backupRefs{}, corrupt("backup cfg", err)
	}
	if err := checkBackup(j.Name, j.VolumeName, j.Blocks); err != nil {
		return backupRefs{}, err
	}
	cks := make([]string, len(j.Blocks))
	for i, b := range j.Blocks {
		cks[i] = b.BlockChecksum
	}
	return backupRefs{createdTime: j.CreatedTime, snapshotCreatedAt: j.SnapshotCreatedAt, checksums: cks}, nil
}
