package orphan_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/orphan"
)

func TestParseAutoDeletion(t *testing.T) {
	instances := []orphan.Kind{orphan.KindEngineInstance, orphan.KindReplicaInstance}
	both := append([]orphan.Kind{orphan.KindReplicaData}, instances...)
	cases := []struct {
		in   string
		want []orphan.Kind
	}{
		{"", nil},
		{"  ", nil},
		{"\t\n", nil},
		{"replica-data", []orphan.Kind{orphan.KindReplicaData}},
		{"instance", instances},
		{"replica-data;instance", both},
		{"instance;replica-data", both},
		{" replica-data ; instance ", both},
		{"\treplica-data;instance\n", both}, // strings.TrimSpace of the whole value
		{"\u00a0instance", instances},       // Unicode space too, as TrimSpace
		{"instance;instance", instances},
	}
	for _, tc := range cases {
		got, err := orphan.ParseAutoDeletion(tc.in)
		if err != nil {
			t.Errorf("ParseAutoDeletion(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseAutoDeletion(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestParseAutoDeletionRejectsWhatLonghornRejects: every value Longhorn's
// validator for orphan-resource-auto-deletion refuses is a *SettingError
// naming the item at fault, never a guess.
func TestParseAutoDeletionRejectsWhatLonghornRejects(t *testing.T) {
	cases := []struct {
		in, item string
	}{
		{"replica", "replica"},
		{"replica-data;", ""},
		{";", ""},
		{";;instance", ""},
		{"true", "true"},
		{"false", "false"},
		{"backup", "backup"},
		{"replica-data,instance", "replica-data,instance"},
		{"replica,backup", "replica,backup"},
		{"replica-data;\tinstance", "\tinstance"},
		{"replica-data\t;instance", "replica-data\t"},
		{"Instance", "Instance"},
		{"replica-data;engine", "engine"},
		{`{"v1":"instance"}`, `{"v1":"instance"}`},
	}
	for _, tc := range cases {
		_, err := orphan.ParseAutoDeletion(tc.in)
		var se *orphan.SettingError
		if !errors.As(err, &se) || !errors.Is(err, orphan.ErrInvalidSetting) {
			t.Errorf("ParseAutoDeletion(%q): got %v, want a *SettingError", tc.in, err)
			continue
		}
		if se.Item != tc.item || se.Value != tc.in || se.Setting != orphan.SettingAutoDeletion {
			t.Errorf("ParseAutoDeletion(%q): error names %s item %q value %q, want item %q", tc.in, se.Setting, se.Item, se.Value, tc.item)
		}
	}
}

// TestParseLegacyAutoDeletion: the boolean orphan-auto-deletion, read as
// Longhorn validated it and migrated it to v1.9.0.
func TestParseLegacyAutoDeletion(t *testing.T) {
	for in, want := range map[string][]orphan.Kind{
		"true": {orphan.KindReplicaData}, "false": nil, "": nil, "TRUE": nil, " true": nil, "1": nil, "f": nil,
	} {
		got, err := orphan.ParseLegacyAutoDeletion(in)
		if in == "" {
			// ParseBool("") fails: an empty boolean was never valid.
			if !errors.Is(err, orphan.ErrInvalidSetting) {
				t.Errorf("ParseLegacyAutoDeletion(%q): %v, want a *SettingError", in, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseLegacyAutoDeletion(%q) = %v, %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"replica", "replica,backup", "yes", "instance"} {
		if _, err := orphan.ParseLegacyAutoDeletion(bad); !errors.Is(err, orphan.ErrInvalidSetting) {
			t.Errorf("ParseLegacyAutoDeletion(%q): %v, want a *SettingError", bad, err)
		}
	}
}

// TestFailedBackupsAreCaretakersOwnOption: no Longhorn setting string
// turns on the auto-deletion of failed backups; Policy.FailedBackups does.
func TestFailedBackupsAreCaretakersOwnOption(t *testing.T) {
	p, err := orphan.ParsePolicy("replica-data;instance", "0")
	if err != nil {
		t.Fatal(err)
	}
	if p.AutoDeletes(orphan.KindBackup) {
		t.Fatal("Longhorn's setting enabled failed-backup deletion")
	}
	p.FailedBackups = true
	if !p.AutoDeletes(orphan.KindBackup) || !p.AutoDeletes(orphan.KindReplicaData) {
		t.Fatalf("FailedBackups: %+v", p)
	}
}

func TestParsePolicy(t *testing.T) {
	p, err := orphan.ParsePolicy("replica-data", "")
	if err != nil {
		t.Fatal(err)
	}
	if p.GracePeriod != 300*time.Second {
		t.Errorf("default grace = %v, want 300s", p.GracePeriod)
	}
	if !p.AutoDeletes(orphan.KindReplicaData) || p.AutoDeletes(orphan.KindEngineInstance) {
		t.Errorf("policy kinds = %v", p.Kinds)
	}
	p, err = orphan.ParsePolicy("instance", "0")
	if err != nil || p.GracePeriod != 0 {
		t.Errorf("ParsePolicy(instance, 0) = %+v, %v", p, err)
	}
	for _, bad := range []string{"-1", "1.5", "5m", "99999999999999999999", "9223372036854775807"} {
		if _, err := orphan.ParsePolicy("", bad); !errors.Is(err, orphan.ErrInvalidSetting) {
			t.Errorf("grace %q: got %v, want ErrInvalidSetting", bad, err)
		}
	}
}

func TestPolicyDueAtCountsFromCreation(t *testing.T) {
	p := orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}, GracePeriod: 5 * time.Minute}
	r := orphanRecord("node-1", "disk-1", "pvc-1-0123abcd")
	due, ok := p.DueAt(r)
	if !ok || !due.Equal(r.CreatedAt.Add(5*time.Minute)) {
		t.Fatalf("DueAt = %v, %v", due, ok)
	}
	if _, ok := (orphan.Policy{}).DueAt(r); ok {
		t.Fatalf("the zero policy auto-deletes")
	}
}

// FuzzParseAutoDeletion holds ParseAutoDeletion to a plain transcription
// of Longhorn's validator (ValidateSetting → validateSettingString →
// UnmarshalOrphanResourceTypes): the same values accepted, the same kinds.
func FuzzParseAutoDeletion(f *testing.F) {
	for _, s := range []string{"", "true", "replica-data;instance", "replica,backup", "x;y", ";;", ",", "instance;", " instance ; replica-data", "\tinstance"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kinds, err := orphan.ParseAutoDeletion(s)
		wantData, wantInstance, wantOK := longhornAutoDeletion(s)
		if (err == nil) != wantOK {
			t.Fatalf("ParseAutoDeletion(%q): err %v, Longhorn accepts: %v", s, err, wantOK)
		}
		if err != nil {
			if !errors.Is(err, orphan.ErrInvalidSetting) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		p := orphan.Policy{Kinds: kinds}
		if p.AutoDeletes(orphan.KindReplicaData) != wantData || p.AutoDeletes(orphan.KindEngineInstance) != wantInstance ||
			p.AutoDeletes(orphan.KindReplicaInstance) != wantInstance || p.AutoDeletes(orphan.KindBackup) {
			t.Fatalf("ParseAutoDeletion(%q) = %v, Longhorn enables replica-data %v, instance %v", s, kinds, wantData, wantInstance)
		}
		seen := map[orphan.Kind]bool{}
		for _, k := range kinds {
			if !k.Valid() || seen[k] {
				t.Fatalf("ParseAutoDeletion(%q) = %v: invalid or repeated kind", s, kinds)
			}
			seen[k] = true
		}
	})
}

// longhornAutoDeletion is what Longhorn's validator and parser make of a
// value of orphan-resource-auto-deletion, written out step by step.
func longhornAutoDeletion(value string) (replicaData, instance, ok bool) {
	v := strings.Trim(strings.TrimSpace(value), " ")
	if v == "" {
		return false, false, true
	}
	for _, item := range strings.Split(v, ";") {
		switch strings.Trim(item, " ") {
		case "replica-data":
			replicaData = true
		case "instance":
			instance = true
		default:
			return false, false, false
		}
	}
	return replicaData, instance, true
}

func FuzzParseGracePeriod(f *testing.F) {
	for _, s := range []string{"", "300", "0", "-1", "1e3", " 42 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := orphan.ParseGracePeriod(s)
		if err != nil {
			if !errors.Is(err, orphan.ErrInvalidSetting) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if d < 0 || d%time.Second != 0 {
			t.Fatalf("ParseGracePeriod(%q) = %v", s, d)
		}
	})
}
