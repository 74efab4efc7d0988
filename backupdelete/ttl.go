package backupdelete

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/caretaker-storage/caretaker/internal/settings"
)

// This file is Longhorn's failed-backup-ttl: a setting and a pure rule.

// DefaultFailedBackupTTL is Longhorn's failed-backup-ttl default: 1440
// minutes.
const DefaultFailedBackupTTL = 1440 * time.Minute

// SettingError says which setting value could not be parsed and why; it
// wraps ErrInvalidSetting. It is the same type as every caretaker
// package's SettingError.
type SettingError = settings.Error

// ErrInvalidSetting is wrapped by every *SettingError; the same value as
// every caretaker package's ErrInvalidSetting.
var ErrInvalidSetting = settings.ErrInvalid

// SettingFailedBackupTTL is the name of Longhorn's failed-backup-ttl
// setting.
const SettingFailedBackupTTL = "failed-backup-ttl"

// ParseFailedBackupTTL parses Longhorn's failed-backup-ttl setting: a whole
// number of minutes, 0 disabling the clean-up; "" is the default (1440).
// Surrounding ASCII white space is ignored (settings.Trim, the rule every
// caretaker parser shares). Anything else is a *SettingError.
func ParseFailedBackupTTL(value string) (time.Duration, error) {
	v := settings.Trim(value)
	if v == "" {
		return DefaultFailedBackupTTL, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > int64(time.Duration(1<<63-1)/time.Minute) {
		return 0, &SettingError{Setting: SettingFailedBackupTTL, Value: value, Reason: "want a whole number of minutes >= 0"}
	}
	return time.Duration(n) * time.Minute, nil
}

// ExpiredFailedBackups applies Longhorn's failed-backup-ttl: the backups in
// Error or Unknown whose FailedAt is at least ttl before now, sorted, for
// the host to delete (set their deletion, then the Driver runs). A ttl of 0
// disables it; a zero FailedAt never expires. RequeueAt is when the next
// failed backup expires (zero if none will). Pass only backups this cluster
// created: Longhorn leaves backups synced from a target alone.
func ExpiredFailedBackups(backups []Backup, ttl time.Duration, now time.Time) (expired []BackupRef, requeueAt time.Time) {
	if ttl <= 0 {
		return nil, time.Time{}
	}
	for _, b := range backups {
		if !b.State.Failed() || b.FailedAt.IsZero() {
			continue
		}
		due := b.FailedAt.Add(ttl)
		if !now.Before(due) {
			expired = append(expired, b.Ref)
		} else if requeueAt.IsZero() || due.Before(requeueAt) {
			requeueAt = due
		}
	}
	slices.SortFunc(expired, func(a, b BackupRef) int { return cmp.Compare(a.String(), b.String()) })
	return expired, requeueAt
}
