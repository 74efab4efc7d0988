package lhreplica_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/internal/lhreplica"
	"github.com/caretaker-storage/caretaker/internal/lhreplica/lhreplicatest"
)

// The tests over every engine release's volume.meta, which
// lhreplicatest.ReleaseForms holds for diskscan's and salvage's tests
// too.

// TestParseVolumeMetaEveryRelease: the volume.meta of every engine
// release parses, through the fast path, to what it says, with its form
// named; the reference agrees.
func TestParseVolumeMetaEveryRelease(t *testing.T) {
	for _, r := range lhreplicatest.ReleaseForms() {
		m, err := lhreplica.ParseVolumeMeta([]byte(r.File))
		if err != nil || !reflect.DeepEqual(m, r.Want) {
			t.Errorf("%s: %+v, %v; want %+v", r.Release, m, err, r.Want)
		}
		if fast, ok := lhreplica.ParseMetaFast([]byte(r.File)); !ok || fast != r.Want {
			t.Errorf("%s: the fast path read %+v, %v", r.Release, fast, ok)
		}
		lhreplica.CheckMetaAgainstRef(t, []byte(r.File))
	}
}

// MetaSeeds are volume.meta inputs near the edges of what parseMetaFast
// accepts: the engine's forms, and every way to step off them.
func MetaSeeds() []string {
	full := `{"Size":1073741824,"Head":"volume-head-002.img","Dirty":true,"Rebuilding":false,"Error":"","Parent":"volume-snap-a.img","SectorSize":512,"BackingFilePath":"","Encrypted":true,"New":1}`
	engine := string(lhreplicatest.EngineMeta(1 << 30))
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
	for _, r := range lhreplicatest.ReleaseForms() {
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

// TestParseVolumeMetaMatchesReference is the differential test of the
// one-pass parser over the seeds.
func TestParseVolumeMetaMatchesReference(t *testing.T) {
	for _, s := range MetaSeeds() {
		lhreplica.CheckMetaAgainstRef(t, []byte(s))
	}
}

// FuzzParseVolumeMetaMatchesReference compares ParseVolumeMeta (its fast path and its
// fallback) with the reference on any input.
func FuzzParseVolumeMetaMatchesReference(f *testing.F) {
	for _, s := range MetaSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lhreplica.CheckMetaAgainstRef(t, data)
	})
}
