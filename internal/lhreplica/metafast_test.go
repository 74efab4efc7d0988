package lhreplica

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// engineMeta is a volume.meta as engines v1.1.1 to v1.11 write it.
func engineMeta(size int64) []byte {
	return fmt.Appendf(nil, `{"Size":%d,"Head":"volume-head-000.img","Dirty":true,"Rebuilding":false,"Error":"","Parent":"","SectorSize":512,"BackingFilePath":""}`, size)
}

// MetaSeeds are volume.meta inputs near the edges of what parseMetaFast
// accepts: the engine's forms, and every way to step off them.
func MetaSeeds() []string {
	full := `{"Size":1073741824,"Head":"volume-head-002.img","Dirty":true,"Rebuilding":false,"Error":"","Parent":"volume-snap-a.img","SectorSize":512,"BackingFilePath":"","Encrypted":true,"New":1}`
	engine := string(engineMeta(1 << 30))
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
		strings.Replace(engine, `}`, `,"X":1,"X":2}`, 1),
		strings.Replace(engine, `}`, `,"A":1,"B":2,"C":3,"D":4,"E":5}`, 1),
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
	for _, r := range ReleaseForms() {
		seeds = append(seeds, r.File,
			strings.Replace(r.File, `"Parent"`, `"parent"`, 1),
			strings.Replace(r.File, `}`, `,"BackingFileName":null}`, 1),
			strings.Replace(r.File, `}`, `,"BackingFileName":5}`, 1),
			strings.Replace(r.File, `}`, `,"backingfilename":"x"}`, 1),
			strings.Replace(r.File, `}`, `,"Error":null}`, 1),
			strings.Replace(r.File, `}`, `,"BackingFilePath":"a","BackingFileName":"b"}`, 1),
			strings.Replace(r.File, `,"SectorSize":512`, ``, 1))
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
	for _, s := range MetaSeeds() {
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

// FuzzParseVolumeMetaMatchesReference compares ParseVolumeMeta (its fast path and its
// fallback) with the reference on any input.
func FuzzParseVolumeMetaMatchesReference(f *testing.F) {
	for _, s := range MetaSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkMetaAgainstRef(t, data)
	})
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
