package orphan_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/orphan"
)

func TestParseAutoDeletion(t *testing.T) {
	instances := []orphan.Kind{orphan.KindEngineInstance, orphan.KindReplicaInstance}
	cases := []struct {
		in   string
		want []orphan.Kind
	}{
		{"", nil},
		{"  ", nil},
		{"false", nil},
		{"true", []orphan.Kind{orphan.KindReplicaData}},
		{"TRUE", []orphan.Kind{orphan.KindReplicaData}},
		{"replica-data", []orphan.Kind{orphan.KindReplicaData}},
		{"instance", instances},
		{"replica-data;instance", append([]orphan.Kind{orphan.KindReplicaData}, instances...)},
		{"instance;replica-data", append([]orphan.Kind{orphan.KindReplicaData}, instances...)},
		{" replica-data ; instance ", append([]orphan.Kind{orphan.KindReplicaData}, instances...)},
		{"replica-data;", []orphan.Kind{orphan.KindReplicaData}},
		{"replica", []orphan.Kind{orphan.KindReplicaData}},
		{"replica,backup", []orphan.Kind{orphan.KindReplicaData, orphan.KindBackup}},
		{"backup", []orphan.Kind{orphan.KindBackup}},
		{"replica,replica", []orphan.Kind{orphan.KindReplicaData}},
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

func TestParseAutoDeletionRejects(t *testing.T) {
	cases := []struct {
		in, item string
	}{
		{"replicas", "replicas"},
		{"replica-data;engine", "engine"},
		{"replica,true", "true"},
		{"Replica-Data", "Replica-Data"},
		{"replica;backup,instance", ""},
		{"yes", "yes"},
	}
	for _, tc := range cases {
		_, err := orphan.ParseAutoDeletion(tc.in)
		var se *orphan.SettingError
		if !errors.As(err, &se) || !errors.Is(err, orphan.ErrInvalidSetting) {
			t.Errorf("ParseAutoDeletion(%q): got %v, want a *SettingError", tc.in, err)
			continue
		}
		if se.Item != tc.item || se.Value != tc.in {
			t.Errorf("ParseAutoDeletion(%q): error names item %q value %q, want %q", tc.in, se.Item, se.Value, tc.item)
		}
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

func FuzzParseAutoDeletion(f *testing.F) {
	for _, s := range []string{"", "true", "replica-data;instance", "replica,backup", "x;y", ";;", ",", "instance;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kinds, err := orphan.ParseAutoDeletion(s)
		if err != nil {
			if !errors.Is(err, orphan.ErrInvalidSetting) {
				t.Fatalf("untyped error %v", err)
			}
			return
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
