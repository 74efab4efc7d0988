package fsstore

import (
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
)

// The cfg format is Longhorn's and shared with s3store (package
// internal/lhformat); these are its names in this package.

// Volume is volume.cfg. The Go-style capitalised keys and the string
// encoding of 64-bit numbers are Longhorn's. Longhorn also tags some string
// fields `json:",string"` (BackingImageName, BackingImageChecksum,
// CompressionMethod, StorageClassName, DataEngine), so their values are
// JSON strings holding JSON strings ("\"lz4\""); ParseVolume unwraps them
// and WriteVolume wraps them again.
type Volume = lhformat.Volume

// Backup is backups/backup_<name>.cfg. An empty CreatedTime means the
// backup is still being written.
type Backup = lhformat.Backup

// BlockMapping is one block of a backup: where it goes in the volume and
// the checksum naming its file.
type BlockMapping = lhformat.BlockMapping

// ParseVolume parses volume.cfg. Bad JSON, a wrong type, or a name that is
// not a valid backupstore name is an error wrapping backupdelete.ErrCorrupt.
func ParseVolume(data []byte) (_ Volume, err error) {
	defer prefixErr(&err)
	return lhformat.ParseVolume(data)
}

// ParseBackup parses a backup cfg. Bad JSON, a wrong type, an invalid name
// or a block checksum that cannot name a block file is an error wrapping
// backupdelete.ErrCorrupt: a cfg that cannot be trusted stops block
// collection rather than letting it guess.
func ParseBackup(data []byte) (_ Backup, err error) {
	defer prefixErr(&err)
	return lhformat.ParseBackup(data)
}

var (
	encodeVolume   = lhformat.EncodeVolume
	encodeBackup   = lhformat.EncodeBackup
	checkBackup    = lhformat.CheckBackup
	checkNames     = lhformat.CheckNames
	errBadChecksum = lhformat.ErrBadChecksum
	corrupt        = lhformat.Corrupt
)
