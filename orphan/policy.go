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
	// ';': "replica-data", "instance".
	SettingAutoDeletion = "orphan-resource-auto-deletion"
	// SettingAutoDeletionLegacy is the older setting: items separated by
	// ',' ("replica", "backup"), or older still the value "true".
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
	// GracePeriod is how long after a record's creation auto-deletion
	// waits. Zero means at once; ParsePolicy fills DefaultGracePeriod when
	// the grace-period setting is empty.
	GracePeriod time.Duration
}

// AutoDeletes reports whether the policy deletes orphans of kind k.
func (p Policy) AutoDeletes(k Kind) bool { return slices.Contains(p.Kinds, k) }

// DueAt returns when the policy deletes r, and false if it never does.
func (p Policy) DueAt(r Record) (time.Time, bool) {
	if !p.AutoDeletes(r.Kind) {
		return time.Time{}, false
	}
	return r.CreatedAt.Add(p.GracePeriod), true
}

// ParsePolicy reads the two settings. autoDeletion may be in either syntax
// (see ParseAutoDeletion); gracePeriod is whole seconds, empty meaning
// DefaultGracePeriod.
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

// ParseAutoDeletion reads an auto-deletion setting in any of its syntaxes
// and returns the kinds it enables, in the order of Kinds, without
// duplicates:
//
//	"replica-data;instance"  today's orphan-resource-auto-deletion
//	"replica,backup"         the older orphan-auto-deletion
//	"true" / "false"         older still: replica data, or nothing
//	""                       nothing
//
// Items are trimmed (settings' one rule: surrounding ASCII white space)
// and matched exactly against the kinds' AutoDeletionItems: "replica-data"
// and "replica" mean replica data; "instance" means engine and replica
// instances; "backup" means failed backups. An unknown item is a
// *SettingError naming it; nothing is guessed.
func ParseAutoDeletion(value string) ([]Kind, error) {
	v := settings.Trim(value)
	switch strings.ToLower(v) {
	case "", "false":
		return nil, nil
	case "true":
		return []Kind{KindReplicaData}, nil
	}
	sep := ";"
	setting := SettingAutoDeletion
	if strings.Contains(v, ",") {
		if strings.Contains(v, ";") {
			return nil, &SettingError{Setting: SettingAutoDeletion, Value: value, Reason: "mixes ';' and ',' separators"}
		}
		sep, setting = ",", SettingAutoDeletionLegacy
	}
	enabled := map[Kind]bool{}
	for _, raw := range strings.Split(v, sep) {
		item := settings.Trim(raw)
		if item == "" {
			continue // "replica-data;" and friends: tolerate an empty item
		}
		kinds := kindsForItem(item)
		if len(kinds) == 0 {
			return nil, &SettingError{Setting: setting, Value: value, Item: item,
				Reason: "unknown item", Allowed: autoDeletionItems()}
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
