package orphan

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caretaker-storage/caretaker/internal/settings"
)

// Setting names and defaults of Longhorn's orphan auto-deletion.
const (
	// SettingAutoDeletion lists what is deleted automatically, separated by
	// ';': "replica-data", "instance" (see ParseAutoDeletion).
	SettingAutoDeletion = "orphan-resource-auto-deletion"
	// SettingAutoDeletionLegacy is the boolean setting it replaced in
	// Longhorn v1.9.0: "true" meant replica data (see
	// ParseLegacyAutoDeletion).
	SettingAutoDeletionLegacy = "orphan-auto-deletion"
	// SettingGracePeriod is the grace period in seconds, counted from a
	// record's creation.
	SettingGracePeriod = "orphan-resource-auto-deletion-grace-period"

	// DefaultGracePeriod is Longhorn's default grace period.
	DefaultGracePeriod = 300 * time.Second
)

// ErrInvalidSetting is wrapped by every *SettingError. It is the same
// value in every caretaker package.
var ErrInvalidSetting = settings.ErrInvalid

// SettingError says which setting value was rejected and why. It is the
// same type in every caretaker package that reads settings.
type SettingError = settings.Error

// Policy is the auto-deletion policy. The zero value deletes nothing
// automatically; manual deletion requests are honoured whatever the policy.
type Policy struct {
	// Kinds are the kinds whose orphans are deleted automatically.
	Kinds []Kind
	// FailedBackups turns on the automatic deletion of caretaker's own
	// failed-backup orphans (KindBackup). Longhorn's setting has no item
	// for them, so ParsePolicy never sets it: the host does, from an
	// option of its own.
	FailedBackups bool
	// GracePeriod is how long after a record's creation auto-deletion
	// waits. Zero means at once; ParsePolicy fills DefaultGracePeriod when
	// the grace-period setting is empty.
	GracePeriod time.Duration
}

// AutoDeletes reports whether the policy deletes orphans of kind k.
func (p Policy) AutoDeletes(k Kind) bool {
	return slices.Contains(p.Kinds, k) || (k == KindBackup && p.FailedBackups)
}

// DueAt returns when the policy deletes r, and false if it never does.
func (p Policy) DueAt(r Record) (time.Time, bool) {
	if !p.AutoDeletes(r.Kind) {
		return time.Time{}, false
	}
	return r.CreatedAt.Add(p.GracePeriod), true
}

// ParsePolicy reads Longhorn's two settings: autoDeletion as
// ParseAutoDeletion reads orphan-resource-auto-deletion, gracePeriod in
// whole seconds, empty meaning DefaultGracePeriod. The policy it returns
// never auto-deletes failed backups: set Policy.FailedBackups for that.
func ParsePolicy(autoDeletion, gracePeriod string) (Policy, error) {
	kinds, err := ParseAutoDeletion(autoDeletion)
	if err != nil {
		return Policy{}, err
	}
	grace, err := ParseGracePeriod(gracePeriod)
	if err != nil {
		return Policy{}, err
	}
	return Policy{Kinds: kinds, GracePeriod: grace}, nil
}

// ParseGracePeriod reads the grace-period setting: whole, non-negative
// seconds; empty means DefaultGracePeriod.
func ParseGracePeriod(value string) (time.Duration, error) {
	v := settings.Trim(value)
	if v == "" {
		return DefaultGracePeriod, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, &SettingError{Setting: SettingGracePeriod, Value: value, Reason: "want whole non-negative seconds"}
	}
	const maxSeconds = int64((1<<63 - 1) / time.Second)
	if n > maxSeconds {
		return 0, &SettingError{Setting: SettingGracePeriod, Value: value, Reason: "too large"}
	}
	return time.Duration(n) * time.Second, nil
}

// ParseAutoDeletion reads Longhorn's orphan-resource-auto-deletion
// setting and returns the kinds it enables, in the order of Kinds,
// without duplicates. It accepts exactly what Longhorn's validator does
// (longhorn-manager types/setting.go: ValidateSetting, through
// validateSettingString, trims the value with strings.TrimSpace, then
// UnmarshalOrphanResourceTypes splits it on ';' and trims each item of
// spaces):
//
//	""                        nothing (the setting's default)
//	"replica-data"            replica data directories (KindReplicaData)
//	"instance"                engine and replica instances
//	"replica-data;instance"   both; " replica-data ; instance " too
//
// Everything else is a *SettingError naming the first item at fault: an
// empty item ("replica-data;", ";"), an item with a tab or another
// character that is not a space around it, another separator (",") or
// spelling ("Instance", "replica", "true"), and "backup", which Longhorn
// does not know (caretaker's failed-backup orphans are enabled by
// Policy.FailedBackups). A repeated item is accepted, as Longhorn does.
func ParseAutoDeletion(value string) ([]Kind, error) {
	v := strings.Trim(strings.TrimSpace(value), " ")
	if v == "" {
		return nil, nil
	}
	enabled := map[Kind]bool{}
	for _, raw := range strings.Split(v, ";") {
		item := strings.Trim(raw, " ")
		kinds := kindsForItem(item)
		if len(kinds) == 0 {
			reason := "unknown item"
			if item == "" {
				reason = "empty item"
			}
			return nil, &SettingError{Setting: SettingAutoDeletion, Value: value, Item: raw,
				Reason: reason + " of a ';'-separated list", Allowed: autoDeletionItems()}
		}
		for _, k := range kinds {
			enabled[k] = true
		}
	}
	var kinds []Kind
	for _, s := range kindSpecs {
		if enabled[s.Kind] {
			kinds = append(kinds, s.Kind)
		}
	}
	return kinds, nil
}

// ParseLegacyAutoDeletion reads Longhorn's older orphan-auto-deletion
// setting, a boolean that Longhorn v1.9.0 replaced with
// orphan-resource-auto-deletion. It accepts what Longhorn validated for a
// boolean setting (strconv.ParseBool of the value trimmed with
// strings.TrimSpace) and, as Longhorn's upgrade to v1.9.0 migrated it
// (longhorn-manager upgrade/v18xto190/upgrade.go,
// updateOrphanResourceAutoDeletionSetting), enables replica data only
// for the exact value "true": any other spelling of true enables
// nothing, as it did after that upgrade. Anything else is a
// *SettingError. A host still holding the old setting merges its kinds
// with ParseAutoDeletion's.
func ParseLegacyAutoDeletion(value string) ([]Kind, error) {
	if _, err := strconv.ParseBool(strings.TrimSpace(value)); err != nil {
		return nil, &SettingError{Setting: SettingAutoDeletionLegacy, Value: value,
			Reason: "not a boolean", Allowed: []string{"true", "false"}}
	}
	if value == "true" {
		return []Kind{KindReplicaData}, nil
	}
	return nil, nil
}
