package lhreplica

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// engineMeta is a volume.meta as engines v1.1.1 to v1.11 write it.
func engineMeta(size int64) []byte {
	return fmt.Appendf(nil, `{"Size":%d,"Head":"volume-head-000.img","Dirty":true,"Rebuilding":false,"Error":"","Parent":"","SectorSize":512,"BackingFilePath":""}`, size)
}

// checkMetaAgainstRef fails t if ParseVolumeMeta and the reference
// disagree on data, or if the fast path accepts what the reference
// refuses or reads it otherwise.
func checkMetaAgainstRef(t *testing.T, data []byte) {
	t.Helper()
	want, wantErr := parseVolumeMetaRef(data)
	got, gotErr := ParseVolumeMeta(data)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() || got != want {
		t.Fatalf("%q:\nParseVolumeMeta %+v, %v\nreference       %+v, %v", data, got, gotErr, want, wantErr)
	}
	if fast, ok := parseMetaFast(data); ok && (wantErr != nil || fast != want) {
		t.Fatalf("%q: the fast path read %+v; the reference %+v, %v", data, fast, want, wantErr)
	}
}

// TestParseMetaFastTakesTheEngineForms: the engine's own files, with or
// without Encrypted, pretty-printed or not, never need encoding/json.
func TestParseMetaFastTakesTheEngineForms(t *testing.T) {
	want := VolumeMeta{Size: 1 << 30, Head: "volume-head-000.img", Dirty: true, SectorSize: 512}
	pretty, err := json.MarshalIndent(want, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	withEnc := want
	withEnc.Encrypted = true
	plain, err := json.Marshal(withEnc)
	if err != nil {
		t.Fatal(err)
	}
	v111, v112, v112enc := want, want, withEnc
	v111.Format, v112.Format, v112enc.Format = FormatV111, FormatV112, FormatV112
	for in, w := range map[string]VolumeMeta{
		string(engineMeta(1 << 30)): v111,
		string(pretty) + "\n":       v112,
		string(plain):               v112enc,
	} {
		m, ok := parseMetaFast([]byte(in))
		if !ok || !reflect.DeepEqual(m, w) {
			t.Errorf("%s: %+v, %v; want %+v from the fast path", in, m, ok, w)
		}
	}
}

// validDataNameRef is the data-directory name rule written plainly: the
// reference ValidDataName's one pass is compared with.
func validDataNameRef(name string) bool {
	if !PlainName(name) || len(name) < DataNameSuffixLen+2 {
		return false
	}
	if name[len(name)-DataNameSuffixLen-1] != '-' {
		return false
	}
	for i := len(name) - DataNameSuffixLen; i < len(name); i++ {
		if !isAlnum(name[i]) {
			return false
		}
	}
	return true
}

// FuzzValidDataNameMatchesReference compares ValidDataName with the
// reference on any name, and VolumeOfDataName with it.
func FuzzValidDataNameMatchesReference(f *testing.F) {
	for _, s := range DataNameSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got, want := ValidDataName(name), validDataNameRef(name)
		if got != want {
			t.Fatalf("ValidDataName(%q) = %v, the reference says %v", name, got, want)
		}
		v := VolumeOfDataName(name)
		if want && (v == "" || v+"-"+name[len(v)+1:] != name || len(name)-len(v) != DataNameSuffixLen+1) || !want && v != "" {
			t.Fatalf("VolumeOfDataName(%q) = %q", name, v)
		}
	})
}
