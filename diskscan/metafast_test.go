package diskscan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
)

// parseVolumeMetaRef is ParseVolumeMeta as it was before parseMetaFast,
// kept verbatim (it requires the keys of metaKeys) as the reference the
// fast path is compared with.
func parseVolumeMetaRef(data []byte) (VolumeMeta, error) {
	var raw map[string]json.RawMessage
	if err := strictUnmarshal(data, &raw); err != nil {
		return VolumeMeta{}, corrupt(MetaFile, "not a JSON object: %v", err)
	}
	if raw == nil {
		return VolumeMeta{}, corrupt(MetaFile, "not a JSON object: null")
	}
	for _, k := range metaKeys {
		v, ok := raw[k]
		if !ok {
			return VolumeMeta{}, corrupt(MetaFile, "missing key %q", k)
		}
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return VolumeMeta{}, corrupt(MetaFile, "key %q is null", k)
		}
	}
	var m VolumeMeta
	if err := json.Unmarshal(data, &m); err != nil {
		return VolumeMeta{}, corrupt(MetaFile, "%v", err)
	}
	if m.Size < 0 || m.SectorSize < 0 {
		return VolumeMeta{}, corrupt(MetaFile, "negative Size %d or SectorSize %d", m.Size, m.SectorSize)
	}
	return m, nil
}

// metaSeeds are volume.meta inputs near the edges of what parseMetaFast
// accepts: the engine's forms, and every way to step off them.
func metaSeeds() []string {
	full := `{"Size":1073741824,"Head":"volume-head-002.img","Dirty":true,"Rebuilding":false,"Error":"","Parent":"volume-snap-a.img","SectorSize":512,"BackingFilePath":"","Encrypted":true,"New":1}`
	engine := string(disktest.Meta(1 << 30))
	seeds := []string{
		full, engine,
		" \n\t" + engine + "\r\n ",
		`{ "Size" : 0 , "Head" : "" , "Dirty" : false , "Rebuilding" : true , "Error" : "e" , "Parent" : "p" , "SectorSize" : 4096 , "BackingFilePath" : "/b" }`,
		strings.Replace(engine, `}`, `,"BackingFile":null,"X":"y","Y":true,"Z":0}`, 1),
		strings.Replace(engine, `}`, `,"Encrypted":false}`, 1),
		strings.Replace(engine, `}`, `,"Encrypted":null}`, 1),
		strings.Replace(engine, `}`, `,"encrypted":true}`, 1),
		strings.Replace(engine, `}`, `,"size":5}`, 1),
		strings.Replace(engine, `}`, `,"SIZE":null}`, 1),
		strings.Replace(engine, `}`, `,"Size":7}`, 1),
		strings.Replace(engine, `}`, `,"Head":"other"}`, 1),
		strings.Replace(engine, `}`, `,"ſize":5}`, 1),
		strings.Replace(engine, `}`, `,"Sıze":5}`, 1),
		strings.Replace(engine, `}`, `,"X":{"a":[1,2]}}`, 1),
		strings.Replace(engine, `}`, `,"X":1.5}`, 1),
		strings.Replace(engine, `}`, `,"X":-1}`, 1),
		strings.Replace(engine, `"Head"`, `"\u0048ead"`, 1),
		strings.Replace(engine, `"volume-head-000.img"`, `"volume-head-\u0030.img"`, 1),
		strings.Replace(engine, `"volume-head-000.img"`, "\"volume-\xff.img\"", 1),
		strings.Replace(engine, `"volume-head-000.img"`, `"volume-héad.img"`, 1),
		strings.Replace(engine, `"volume-head-000.img"`, "\"a\tb\"", 1),
		strings.Replace(engine, `"volume-head-000.img"`, `null`, 1),
		strings.Replace(engine, `"volume-head-000.img"`, `5`, 1),
		strings.Replace(engine, `:1073741824`, `:-1`, 1),
		strings.Replace(engine, `:1073741824`, `:-0`, 1),
		strings.Replace(engine, `:1073741824`, `:01`, 1),
		strings.Replace(engine, `:1073741824`, `:1e3`, 1),
		strings.Replace(engine, `:1073741824`, `:1.0`, 1),
		strings.Replace(engine, `:1073741824`, `:9223372036854775807`, 1),
		strings.Replace(engine, `:1073741824`, `:9223372036854775808`, 1),
		strings.Replace(engine, `:1073741824`, `:99999999999999999999`, 1),
		strings.Replace(engine, `:1073741824`, `:"1"`, 1),
		strings.Replace(engine, `:1073741824`, `:null`, 1),
		strings.Replace(engine, `"Dirty":true`, `"Dirty":tru`, 1),
		strings.Replace(engine, `"Dirty":true`, `"Dirty":truex`, 1),
		strings.Replace(engine, `"Dirty":true`, `"Dirty":1`, 1),
		strings.Replace(engine, `"Dirty":true`, `"Dirty":null`, 1),
		strings.Replace(engine, `"Dirty":true,`, ``, 1),
		strings.Replace(engine, `,"BackingFilePath":""`, ``, 1),
		strings.Replace(engine, `,`, `,,`, 1),
		strings.Replace(engine, `}`, `,}`, 1),
		engine + `{}`, engine + ` x`, engine + "\x00", "\ufeff" + engine,
		engine[:len(engine)-1], engine[:20],
		`{}`, `null`, `[]`, `""`, `1`, ``, ` `, `{`, `{"Size"}`, `{"Size":}`,
	}
	// Every engine release's form, and steps off the keys only some write.
	for _, r := range releaseMetas() {
		seeds = append(seeds, r.file,
			strings.Replace(r.file, `"Parent"`, `"parent"`, 1),
			strings.Replace(r.file, `}`, `,"BackingFileName":null}`, 1),
			strings.Replace(r.file, `}`, `,"BackingFileName":5}`, 1),
			strings.Replace(r.file, `}`, `,"backingfilename":"x"}`, 1),
			strings.Replace(r.file, `}`, `,"Error":null}`, 1),
			strings.Replace(r.file, `}`, `,"BackingFilePath":"a","BackingFileName":"b"}`, 1),
			strings.Replace(r.file, `,"SectorSize":512`, ``, 1))
	}
	return seeds
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

// TestParseVolumeMetaMatchesReference is the differential test of the
// one-pass parser over the seeds.
func TestParseVolumeMetaMatchesReference(t *testing.T) {
	for _, s := range metaSeeds() {
		checkMetaAgainstRef(t, []byte(s))
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
	for in, w := range map[string]VolumeMeta{
		string(disktest.Meta(1 << 30)): want,
		string(pretty) + "\n":          want,
		string(plain):                  withEnc,
	} {
		m, ok := parseMetaFast([]byte(in))
		if !ok || !reflect.DeepEqual(m, w) {
			t.Errorf("%s: %+v, %v; want %+v from the fast path", in, m, ok, w)
		}
	}
}

// FuzzParseVolumeMetaMatchesReference compares ParseVolumeMeta (its fast path and its
// fallback) with the reference on any input.
func FuzzParseVolumeMetaMatchesReference(f *testing.F) {
	for _, s := range metaSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkMetaAgainstRef(t, data)
	})
}

// validDataNameRef is ValidDataName as it was before its one-pass
// rewrite: the reference it is compared with.
func validDataNameRef(name string) bool {
	if SafeName(name) != nil || len(name) < suffixLen+2 {
		return false
	}
	if name[len(name)-suffixLen-1] != '-' {
		return false
	}
	for i := len(name) - suffixLen; i < len(name); i++ {
		if !isAlnum(name[i]) {
			return false
		}
	}
	return true
}

// FuzzValidDataNameMatchesReference compares ValidDataName with the
// reference on any name.
func FuzzValidDataNameMatchesReference(f *testing.F) {
	for _, s := range []string{"", ".", "..", "-12345678", "a-12345678", "a/b-12345678", "a\x00-12345678",
		"a-1234567/", "a-1234567\x00", "pvc-000001-r-0a1b2c3d", "pvc-r-0a1b2c3", "pvc-r-0a1b2c3d.del", strings.Repeat("a", 246) + "-12345678",
		strings.Repeat("a", 247) + "-12345678", "ä-12345678", "a-1234567ä"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := ValidDataName(name), validDataNameRef(name); got != want {
			t.Fatalf("ValidDataName(%q) = %v, the reference says %v", name, got, want)
		}
	})
}
