package lhformat

import (
	"errors"

	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// The sentinels of a Longhorn backupstore's failures. Package backupdelete
// exports them under the same names (ErrCorrupt is ErrCorrupt),
// so that this package, and the stores built on it, wrap them without
// importing backupdelete.
var (
	// ErrCorrupt: a backupstore file could not be parsed; nothing was
	// deleted because of it. It is of the malformed-input class
	// (errclass.ErrMalformed).
	ErrCorrupt = errclass.New("backupdelete", "corrupt backupstore file", errclass.ErrMalformed)
	// ErrLocked: the backupstore holds a conflicting lock.
	ErrLocked = errors.New("backupdelete: backupstore volume is locked")
	// ErrListingInconsistent: a listing of a volume's backups contradicted
	// volume.cfg or itself.
	ErrListingInconsistent = errors.New("backupdelete: backupstore listing is inconsistent")
)

// ValidName reports whether s is a valid backupstore volume or backup name:
// Longhorn's rule (backupstore/util.ValidateName, the regular expression
// ^[a-zA-Z0-9][a-zA-Z0-9_.-]+$), so at least two characters, a leading
// letter or digit, then letters, digits, '_', '.', '-'; and at most 253
// characters. It keeps names from being path-like.
func ValidName(s string) bool {
	if len(s) < 2 || len(s) > 253 || !NameByte[s[0]] || s[0] == '_' || s[0] == '.' || s[0] == '-' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !NameByte[s[i]] {
			return false
		}
	}
	return true
}

// NameByte marks the bytes a name may hold: letters, digits, '_', '.', '-'.
var NameByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
	}
	return t
}()
