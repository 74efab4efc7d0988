package lhreplica

import (
	"errors"
	"strings"
	"testing"
)

// DataNameSeeds are directory names near the edges of the name rule.
func DataNameSeeds() []string {
	return []string{"", ".", "..", "-12345678", "a-12345678", "a/b-12345678", "a\x00-12345678",
		"a-1234567/", "a-1234567\x00", "pvc-000001-r-0a1b2c3d", "pvc-r-0a1b2c3", "pvc-r-0a1b2c3d.del",
		strings.Repeat("a", 246) + "-12345678", strings.Repeat("a", 247) + "-12345678", "ä-12345678",
		"a-1234567ä", "a\nb-12345678", "vol--12345678", "vol-1234-678", "vol_12345678", "vol-ABCDEFGH"}
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
