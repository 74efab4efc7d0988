package lhformat

import (
	"crypto/sha512"
	"encoding/hex"
	"path"
	"strings"
)

// Names and directories of Longhorn's backupstore layout
// (longhorn/backupstore config.go getVolumePath, getBackupConfigName;
// deltablock.go getBlockPath, getBlockFilePath; lock.go
// getLockFilePath). On S3 they are the object keys under the target's
// prefix (s3/s3.go updatePath joins them to it).
const (
	BaseDir      = "backupstore"
	VolumesDir   = "volumes"
	VolumeCfg    = "volume.cfg"
	BackupsDir   = "backups"
	BackupPrefix = "backup_"
	CfgSuffix    = ".cfg"
	BlocksDir    = "blocks"
	BlockSuffix  = ".blk"
	LocksDir     = "locks"
	LockPrefix   = "lock-"
	LockSuffix   = ".lck"
)

// VolumePath returns the volume's directory relative to the backupstore's
// root: backupstore/volumes/<c[0:2]>/<c[2:4]>/<volume>, where c is the
// lowercase hex SHA-512 of the volume name. The name must be valid
// (ValidName); it is not checked here.
func VolumePath(volume string) string {
	sum := sha512.Sum512([]byte(volume))
	c := hex.EncodeToString(sum[:2])
	return path.Join(BaseDir, VolumesDir, c[0:2], c[2:4], volume)
}

// BackupCfgPath is backups/backup_<name>.cfg, relative to the volume
// directory.
func BackupCfgPath(backup string) string {
	return BackupsDir + "/" + BackupPrefix + backup + CfgSuffix
}

// BlockPath is blocks/<ck[0:2]>/<ck[2:4]>/<ck>.blk, relative to the
// volume directory; ck must be ValidChecksum.
func BlockPath(ck string) string {
	return BlocksDir + "/" + ck[0:2] + "/" + ck[2:4] + "/" + ck + BlockSuffix
}

// LockPath is locks/<name>.lck, relative to the volume directory.
func LockPath(name string) string { return LocksDir + "/" + name + LockSuffix }

// ValidChecksum accepts what can name a block: 4 to 128 lowercase hex
// digits. Longhorn writes 64 (the first half of a SHA-512 in hex); a cfg
// naming anything else is corrupt, never a path.
func ValidChecksum(ck string) bool {
	if len(ck) < 4 || len(ck) > 128 {
		return false
	}
	for i := 0; i < len(ck); i++ {
		if !LowerHex[ck[i]] {
			return false
		}
	}
	return true
}

// LowerHex marks the bytes 0-9a-f.
var LowerHex = func() (t [256]bool) {
	for _, c := range "0123456789abcdef" {
		t[c] = true
	}
	return t
}()

// BackupNameFromFile returns the backup name of a file in backups/, or ""
// for anything else (temporary files, strays).
func BackupNameFromFile(file string) string {
	if !strings.HasPrefix(file, BackupPrefix) || !strings.HasSuffix(file, CfgSuffix) {
		return ""
	}
	return file[len(BackupPrefix) : len(file)-len(CfgSuffix)]
}

// BlockFromPath returns the checksum of a block path relative to the
// blocks directory ("<a>/<b>/<ck>.blk"), if it is one: a valid checksum
// in the bucket it names. Anything else (a temporary file, a stray, a
// block in the wrong bucket) is "", false, and is never a candidate.
func BlockFromPath(rel string) (string, bool) {
	if len(rel) < 6 || rel[2] != '/' || rel[5] != '/' {
		return "", false
	}
	name := rel[6:]
	if !strings.HasSuffix(name, BlockSuffix) {
		return "", false
	}
	ck := name[:len(name)-len(BlockSuffix)]
	if !ValidChecksum(ck) || rel[0:2] != ck[0:2] || rel[3:5] != ck[2:4] {
		return "", false
	}
	return ck, true
}

// BlockChecksum is the name Longhorn gives a block: the first 64 hex
// digits of the SHA-512 of its uncompressed content (longhorn/backupstore
// util.GetChecksum, PRESERVED_CHECKSUM_LENGTH).
func BlockChecksum(uncompressed []byte) string {
	sum := sha512.Sum512(uncompressed)
	return hex.EncodeToString(sum[:])[:64]
}
