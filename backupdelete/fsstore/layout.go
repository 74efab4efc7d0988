package fsstore

import (
	"encoding/binary"

	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
)

// Names and directories of Longhorn's backupstore layout
// (longhorn/backupstore config.go, deltablock.go, lock.go).
// They are shared with s3store (package internal/lhformat).
const (
	BaseDir      = lhformat.BaseDir // under the mount point
	volumesDir   = lhformat.VolumesDir
	volumeCfg    = lhformat.VolumeCfg
	backupsDir   = lhformat.BackupsDir
	backupPrefix = lhformat.BackupPrefix
	cfgSuffix    = lhformat.CfgSuffix
	blocksDir    = lhformat.BlocksDir
	blockSuffix  = lhformat.BlockSuffix
	locksDir     = lhformat.LocksDir
	lockPrefix   = lhformat.LockPrefix
	lockSuffix   = lhformat.LockSuffix
	tmpInfix     = ".tmp." // Longhorn's temporary files: <file>.tmp.<unixnano>
)

// dirMode is the mode Longhorn creates backupstore directories with
// (longhorn/backupstore fsops/fsops.go preparePath and util.go
// MkdirIfNotExists: os.ModeDir|0700).
const dirMode = 0o700

// VolumePath returns the volume's directory relative to the mount point:
// backupstore/volumes/<c[0:2]>/<c[2:4]>/<volume>, where c is the lowercase
// hex SHA-512 of the volume name. The name must be valid
// (backupdelete.ValidName); it is not checked here.
func VolumePath(volume string) string { return lhformat.VolumePath(volume) }

// backupCfgPath is relative to the volume directory.
func backupCfgPath(backup string) string { return lhformat.BackupCfgPath(backup) }

// blockPath is relative to the volume directory; ck must be validChecksum.
func blockPath(ck string) string { return lhformat.BlockPath(ck) }

// validChecksum accepts what can name a block file: 4 to 128 lowercase hex
// digits. Longhorn writes 64 (the first half of a SHA-512 in hex); a cfg
// naming anything else is corrupt, never a path.
func validChecksum(ck string) bool { return lhformat.ValidChecksum(ck) }

// validChecksumBytes is validChecksum on bytes.
func validChecksumBytes(ck []byte) bool {
	if len(ck) < 4 || len(ck) > 128 {
		return false
	}
	for len(ck) >= 8 {
		if !lowerHex8(binary.LittleEndian.Uint64(ck)) {
			return false
		}
		ck = ck[8:]
	}
	for _, c := range ck {
		if !lowerHex[c] {
			return false
		}
	}
	return true
}

// lowerHex8 reports whether all 8 bytes of x are lowercase hex digits,
// eight at a time: every block reference of every remaining backup is
// validated, and a byte at a time that is most of the scan. For bytes
// below 0x80 (checked first), adding 0x7f-hi sets a byte's high bit iff
// it is above hi, and adding 0x80-lo iff it is at least lo; no sum
// carries into the next byte. TestLowerHex8 checks every byte value in
// every position against the table.
func lowerHex8(x uint64) bool {
	const ones, high = 0x0101010101010101, 0x8080808080808080
	if x&high != 0 {
		return false
	}
	digit := (x + ones*(0x80-'0')) &^ (x + ones*(0x7f-'9'))
	letter := (x + ones*(0x80-'a')) &^ (x + ones*(0x7f-'f'))
	return (digit|letter)&high == high
}

// hexVal is the value of a lowercase hex digit.
var hexVal = func() (t [256]byte) {
	for i, c := range "0123456789abcdef" {
		t[c] = byte(i)
	}
	return t
}()

// lowerHex marks the bytes 0-9a-f (lhformat's table): it keeps the
// checksum checks, which run for every block of every backup a deletion
// reads, branch-light.
var lowerHex = lhformat.LowerHex

// backupNameFromFile returns the backup name of a file in backups/, or ""
// for anything else (temporary files, strays).
func backupNameFromFile(file string) string { return lhformat.BackupNameFromFile(file) }

// shardOf maps a valid two-digit bucket name to 0..255.
func shardOf(ck []byte) int { return int(hexVal[ck[0]])<<4 | int(hexVal[ck[1]]) }
