package rebuild

import (
	"errors"
	"fmt"
	"strings"
)

// SettingName is the name of Longhorn's global setting that turns offline
// replica rebuilding on or off.
const SettingName = "offline-replica-rebuilding"

// VolumeSetting is a volume's own choice about offline rebuilding
// (Longhorn's Volume.Spec.OfflineRebuilding). It overrides the global
// setting unless it is VolumeSettingIgnored.
type VolumeSetting string

const (
	// VolumeSettingIgnored follows the global setting. It is the default.
	VolumeSettingIgnored VolumeSetting = "ignored"
	// VolumeSettingEnabled rebuilds the volume offline whatever the global
	// setting says.
	VolumeSettingEnabled VolumeSetting = "enabled"
	// VolumeSettingDisabled never rebuilds the volume offline.
	VolumeSettingDisabled VolumeSetting = "disabled"
)

// DataEngine names a Longhorn data engine. Offline rebuilding exists for
// engines that cannot rebuild a replica while the volume serves I/O.
type DataEngine string

const (
	// DataEngineV1 is the iSCSI/TCP engine. Volumes created before the v2
	// engine existed have no engine recorded; hosts pass DataEngineV1 for them.
	DataEngineV1 DataEngine = "v1"
	// DataEngineV2 is the SPDK engine, the one seed 003 was written for.
	DataEngineV2 DataEngine = "v2"
)

// ErrUnknownSettingValue is wrapped by every *SettingError: a setting holds a
// value this package does not know. Check it with errors.Is.
var ErrUnknownSettingValue = errors.New("rebuild: unknown setting value")

// SettingError reports a setting value that is not one of the accepted
// values. It wraps ErrUnknownSettingValue.
type SettingError struct {
	Setting string   // which setting: SettingName, or "volume offlineRebuilding"
	Value   string   // the value as given
	Allowed []string // the values that are accepted
}

// Error names the setting, the value and the accepted values.
func (e *SettingError) Error() string {
	return fmt.Sprintf("rebuild: setting %s has unknown value %q (accepted: %s)",
		e.Setting, e.Value, strings.Join(e.Allowed, ", "))
}

// Unwrap lets errors.Is(err, ErrUnknownSettingValue) match.
func (e *SettingError) Unwrap() error { return ErrUnknownSettingValue }

// asciiSpace is the white space the parsers ignore around a value; other
// Unicode spaces are part of the value, and so make it unknown.
const asciiSpace = " \t\n\r\v\f"

// ParseGlobalSetting parses the value of the global setting SettingName.
// It accepts the seed's "enabled" and "disabled" and the "true" and "false"
// that Longhorn's boolean settings use today; surrounding ASCII white space is
// ignored (values read from files often end with a newline); case matters.
// Any other value returns a *SettingError and false, so that a typo turns
// rebuilding off rather than on.
func ParseGlobalSetting(value string) (bool, error) {
	switch strings.Trim(value, asciiSpace) {
	case "enabled", "true":
		return true, nil
	case "disabled", "false":
		return false, nil
	}
	return false, &SettingError{Setting: SettingName, Value: value, Allowed: []string{"enabled", "disabled", "true", "false"}}
}

// ParseVolumeSetting parses a volume's offline rebuilding field. The empty
// string means VolumeSettingIgnored: volumes created before the field existed
// have it empty and follow the global setting. Surrounding ASCII white space is
// ignored. Any other value returns a *SettingError and VolumeSettingDisabled.
func ParseVolumeSetting(value string) (VolumeSetting, error) {
	switch v := VolumeSetting(strings.Trim(value, asciiSpace)); v {
	case "":
		return VolumeSettingIgnored, nil
	case VolumeSettingIgnored, VolumeSettingEnabled, VolumeSettingDisabled:
		return v, nil
	}
	return VolumeSettingDisabled, &SettingError{Setting: "volume offlineRebuilding", Value: value,
		Allowed: []string{string(VolumeSettingIgnored), string(VolumeSettingEnabled), string(VolumeSettingDisabled)}}
}

// Enabled reports whether offline rebuilding is on for a volume, combining
// the global setting and the volume's own: on when the volume says enabled,
// or when the global setting is on and the volume does not say disabled.
// A VolumeSetting that is none of the three constants counts as disabled:
// an unknown value must never start an attachment.
func Enabled(global bool, volume VolumeSetting) bool {
	switch volume {
	case VolumeSettingEnabled:
		return true
	case VolumeSettingIgnored, "":
		return global
	}
	return false
}
