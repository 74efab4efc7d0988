package lhreplica

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// ReleaseForm is a volume.meta as an engine release writes it, and what
// it reads as.
type ReleaseForm struct {
	Release string
	File    string
	Want    VolumeMeta
}

// ReleaseForms are the volume.meta forms of every released v1 engine, as
// its replica.go writes them: encoding/json's Encoder of the release's
// Info (its exported fields in order, then a newline).
func ReleaseForms() []ReleaseForm {
	base := VolumeMeta{Size: 10 << 30, Head: "volume-head-003.img", Dirty: true, Parent: "volume-snap-b.img", SectorSize: 512}
	with := func(f MetaFormat, set func(*VolumeMeta)) VolumeMeta { m := base; m.Format = f; set(&m); return m }
	none := func(*VolumeMeta) {}
	return []ReleaseForm{
		{"v0.1.0", `{"Size":10737418240,"Head":"volume-head-003.img","Dirty":true,"Rebuilding":false,"Parent":"volume-snap-b.img","SectorSize":512}` + "\n", with(FormatV010, none)},
		{"v0.2.0–v1.0.2", `{"Size":10737418240,"Head":"volume-head-003.img","Dirty":true,"Rebuilding":false,"Parent":"volume-snap-b.img","SectorSize":512,"BackingFileName":""}` + "\n", with(FormatV020, none)},
		{"v0.2.0–v1.0.2 with a backing file", `{"Size":10737418240,"Head":"volume-head-003.img","Dirty":true,"Rebuilding":false,"Parent":"volume-snap-b.img","SectorSize":512,"BackingFileName":"centos7.qcow2"}` + "\n",
			with(FormatV020, func(m *VolumeMeta) { m.BackingFilePath = "centos7.qcow2" })},
		{"v1.1.0", `{"Size":10737418240,"Head":"volume-head-003.img","Dirty":true,"Rebuilding":false,"Error":"","Parent":"volume-snap-b.img","SectorSize":512,"BackingFileName":""}` + "\n", with(FormatV110, none)},
		{"v1.1.0 in error", `{"Size":10737418240,"Head":"volume-head-003.img","Dirty":false,"Rebuilding":true,"Error":"stat failed","Parent":"volume-snap-b.img","SectorSize":512,"BackingFileName":""}` + "\n",
			with(FormatV110, func(m *VolumeMeta) { m.Dirty, m.Rebuilding, m.Error = false, true, "stat failed" })},
		{"v1.1.1–v1.11", `{"Size":10737418240,"Head":"volume-head-003.img","Dirty":true,"Rebuilding":false,"Error":"","Parent":"volume-snap-b.img","SectorSize":512,"BackingFilePath":"/host/var/lib/longhorn/backing-images/img-0a1b2c3d/backing"}` + "\n",
			with(FormatV111, func(m *VolumeMeta) { m.BackingFilePath = "/host/var/lib/longhorn/backing-images/img-0a1b2c3d/backing" })},
		{"v1.12", `{"Size":10737418240,"Head":"volume-head-003.img","Dirty":true,"Rebuilding":false,"Error":"","Parent":"volume-snap-b.img","SectorSize":512,"BackingFilePath":"","Encrypted":true}` + "\n",
			with(FormatV112, func(m *VolumeMeta) { m.Encrypted = true })},
	}
}

// DataNameSeeds are directory names near the edges of the name rule.
func DataNameSeeds() []string {
	return []string{"", ".", "..", "-12345678", "a-12345678", "a/b-12345678", "a\x00-12345678",
		"a-1234567/", "a-1234567\x00", "pvc-000001-r-0a1b2c3d", "pvc-r-0a1b2c3", "pvc-r-0a1b2c3d.del",
		strings.Repeat("a", 246) + "-12345678", strings.Repeat("a", 247) + "-12345678", "ä-12345678",
		"a-1234567ä", "a\nb-12345678", "vol--12345678", "vol-1234-678", "vol_12345678", "vol-ABCDEFGH"}
}

// TestParseVolumeMetaEveryRelease: the volume.meta of every engine
// release parses, through the fast path, to what it says, with its form
// named; the reference agrees.
func TestParseVolumeMetaEveryRelease(t *testing.T) {
	for _, r := range ReleaseForms() {
		m, err := ParseVolumeMeta([]byte(r.File))
		if err != nil || !reflect.DeepEqual(m, r.Want) {
			t.Errorf("%s: %+v, %v; want %+v", r.Release, m, err, r.Want)
		}
		if fast, ok := parseMetaFast([]byte(r.File)); !ok || fast != r.Want {
			t.Errorf("%s: the fast path read %+v, %v", r.Release, fast, ok)
		}
		checkMetaAgainstRef(t, []byte(r.File))
	}
}

// TestParseVolumeMetaRefusesWhatReadsTwoWays: each input the engine's
// decoder and a careful reader would read differently is corrupt, with a
// *MetaError naming volume.meta and the problem.
func TestParseVolumeMetaRefusesWhatReadsTwoWays(t *testing.T) {
	engine := string(engineMeta(1 << 20))
	for in, want := range map[string]string{
		strings.Replace(engine, `}`, `,"Size":7}`, 1):                                     `duplicate key "Size"`,
		strings.Replace(engine, `}`, `,"size":7}`, 1):                                     `key "size" is "Size" but for case`,
		strings.Replace(engine, `}`, `,"ſize":7}`, 1):                                     `is "Size" but for case`,
		strings.Replace(engine, `}`, `,"BackingFileName":"x"}`, 1):                        "both BackingFileName and BackingFilePath",
		strings.Replace(engine, `"volume-head-000.img"`, `"../x/volume-head-000.img"`, 1): "is not a file name",
		strings.Replace(engine, `"volume-head-000.img"`, `".."`, 1):                       "is not a file name",
		strings.Replace(engine, `"Error":""`, `"Error":null`, 1):                          `key "Error": null`,
		strings.Replace(engine, `1048576`, `-1`, 1):                                       "negative Size",
		strings.Replace(engine, `"Head":"volume-head-000.img",`, ``, 1):                   `missing key "Head"`,
	} {
		_, err := ParseVolumeMeta([]byte(in))
		var me *MetaError
		if !errors.As(err, &me) || !errors.Is(err, ErrCorrupt) || me.File != VolumeMetaFile || !strings.Contains(me.Detail, want) {
			t.Errorf("%s: %v; want a *MetaError saying %q", in, err, want)
		}
		checkMetaAgainstRef(t, []byte(in))
	}
	// Size 0 and Head "" are the format's; callers decide what they mean.
	for _, in := range []string{string(engineMeta(0)), strings.Replace(engine, `"volume-head-000.img"`, `""`, 1)} {
		if _, err := ParseVolumeMeta([]byte(in)); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
}
