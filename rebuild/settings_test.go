package rebuild

import (
	"errors"
	"testing"
)

func TestParseGlobalSetting(t *testing.T) {
	tests := []struct {
		in      string
		want    bool
		wantErr bool
	}{
		{"enabled", true, false},
		{"disabled", false, false},
		{"true", true, false},
		{"false", false, false},
		{" true\n", true, false},
		{"Enabled", false, true}, // case matters, as in Longhorn's choices
		{"disable", false, true}, // the seed's typo is not a value
		{"", false, true},
		{"yes", false, true},
		{"1", false, true},
	}
	for _, tt := range tests {
		got, err := ParseGlobalSetting(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseGlobalSetting(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil {
			var serr *SettingError
			if !errors.Is(err, ErrInvalidSetting) || !errors.As(err, &serr) || serr.Value != tt.in || serr.Setting != SettingName || len(serr.Allowed) != 4 {
				t.Errorf("ParseGlobalSetting(%q) error %v is not a *SettingError naming the value", tt.in, err)
			}
		}
	}
}

func TestParseVolumeSetting(t *testing.T) {
	tests := []struct {
		in      string
		want    VolumeSetting
		wantErr bool
	}{
		{"", VolumeSettingIgnored, false},
		{"ignored", VolumeSettingIgnored, false},
		{"enabled", VolumeSettingEnabled, false},
		{"disabled", VolumeSettingDisabled, false},
		{"  disabled ", VolumeSettingDisabled, false},
		{"true", VolumeSettingDisabled, true},
		{"ignore", VolumeSettingDisabled, true},
	}
	for _, tt := range tests {
		got, err := ParseVolumeSetting(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseVolumeSetting(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, ErrInvalidSetting) {
			t.Errorf("ParseVolumeSetting(%q) error %v does not wrap ErrInvalidSetting", tt.in, err)
		}
	}
}

// TestEnabled is the seed's table: volume == enabled || (global && volume != disabled).
func TestEnabled(t *testing.T) {
	for _, global := range []bool{false, true} {
		for _, vs := range []VolumeSetting{"", VolumeSettingIgnored, VolumeSettingEnabled, VolumeSettingDisabled, "bogus"} {
			want := vs == VolumeSettingEnabled || (global && (vs == VolumeSettingIgnored || vs == ""))
			if got := Enabled(global, vs); got != want {
				t.Errorf("Enabled(%v, %q) = %v, want %v", global, vs, got, want)
			}
		}
	}
}

// FuzzParseGlobalSetting: any input gives either a known value or a typed
// error, never a panic, and an accepted value is one of the four words.
func FuzzParseGlobalSetting(f *testing.F) {
	for _, s := range []string{"enabled", "disabled", "true", "false", "", " true\n", "Enabled", "\x00", "enabled;disabled"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		on, err := ParseGlobalSetting(in)
		if err != nil {
			var serr *SettingError
			if !errors.As(err, &serr) || !errors.Is(err, ErrInvalidSetting) || on {
				t.Fatalf("ParseGlobalSetting(%q) = %v, %v: want false and a *SettingError", in, on, err)
			}
			if serr.Error() == "" {
				t.Fatal("empty error text")
			}
			return
		}
		canonical := map[bool][]string{true: {"enabled", "true"}, false: {"disabled", "false"}}[on]
		again := false
		for _, c := range canonical {
			if v, err := ParseGlobalSetting(c); err == nil && v == on && trimmedEquals(in, c) {
				again = true
			}
		}
		if !again {
			t.Fatalf("ParseGlobalSetting(%q) = %v accepted a value that is not a known word", in, on)
		}
	})
}

// FuzzParseVolumeSetting: the result is always one of the three constants,
// and an error always comes with VolumeSettingDisabled.
func FuzzParseVolumeSetting(f *testing.F) {
	for _, s := range []string{"", "ignored", "enabled", "disabled", "true", "\tenabled\n", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseVolumeSetting(in)
		switch got {
		case VolumeSettingIgnored, VolumeSettingEnabled, VolumeSettingDisabled:
		default:
			t.Fatalf("ParseVolumeSetting(%q) = %q, not a known setting", in, got)
		}
		if err != nil && (got != VolumeSettingDisabled || !errors.Is(err, ErrInvalidSetting)) {
			t.Fatalf("ParseVolumeSetting(%q) = %q, %v: an error must come with disabled", in, got, err)
		}
		if err == nil && got != VolumeSettingIgnored && !trimmedEquals(in, string(got)) {
			t.Fatalf("ParseVolumeSetting(%q) = %q from a different word", in, got)
		}
	})
}

// trimmedEquals compares in and word after removing white space around in,
// written without strings.TrimSpace so the check is independent of the code.
func trimmedEquals(in, word string) bool {
	isSpace := func(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f' }
	i, j := 0, len(in)
	for i < j && isSpace(in[i]) {
		i++
	}
	for j > i && isSpace(in[j-1]) {
		j--
	}
	return in[i:j] == word
}
