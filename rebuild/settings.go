package rebuild

import "github.com/caretaker-storage/caretaker/internal/settings"

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

// SettingError is caretaker's one setting error: it names the setting, the
// value as given, why it was refused and the accepted values. It wraps
// ErrInvalidSetting.
type SettingError = settings.Error

// ErrInvalidSetting is wrapped by every *SettingError: a setting holds a
// value this package does not know. It is the same value in every
// caretaker package, so a host matches a bad orphan, backup or rebuild
// setting alike with errors.Is.
var ErrInvalidSetting = settings.ErrInvalid

// ParseGlobalSetting parses the value of the global setting SettingName.
// It accepts the proposal's "enabled" and "disabled" and the "true" and "false"
// that Longhorn's boolean settings use today; surrounding ASCII white space is
// ignored, as settings.Trim does for every caretaker setting (values read
// from files often end with a newline); case matters.
// Any other value returns a *SettingError and false, so that a typo turns
// rebuilding off rather than on.
func ParseGlobalSetting(value string) (bool, error) {
	switch settings.Trim(value) {
	case "enabled", "true":
		return true, nil
	case "disabled", "false":
		return false, nil
	}
	return false, &SettingError{Setting: SettingName, Value: value, Reason: "unknown value",
		Allowed: []string{"enabled", "disabled", "true", "false"}}
}

// ParseVolumeSetting parses a volume's offline rebuilding field. The empty
// string means VolumeSettingIgnored: volumes created before the field existed
// have it empty and follow the global setting. Surrounding ASCII white space is
// ignored. Any other value returns a *SettingError and VolumeSettingDisabled.
func ParseVolumeSetting(value string) (VolumeSetting, error) {
	switch v := VolumeSetting(settings.Trim(value)); v {
	case "":
		return VolumeSettingIgnored, nil
	case VolumeSettingIgnored, VolumeSettingEnabled, VolumeSettingDisabled:
		return v, nil
	}
	return VolumeSettingDisabled, &SettingError{Setting: "volume offlineRebuilding", Value: value, Reason: "unknown value",
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
