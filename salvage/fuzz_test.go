package salvage_test

import (
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/salvage"
	"github.com/caretaker-storage/caretaker/salvage/salvagetest"
)

func FuzzParseVolumeMeta(f *testing.F) {
	for _, format := range []salvage.MetaFormat{salvage.FormatV010, salvage.FormatV020, salvage.FormatV110, salvage.FormatV111, salvage.FormatV112} {
		f.Add(salvagetest.VolumeMeta(salvagetest.Replica{Size: 1 << 30, Format: format, Dirty: true}, "volume-snap-x.img"))
	}
	f.Add([]byte(`{"Size":1,"Head":"h","Dirty":false,"Rebuilding":false,"Parent":"","SectorSize":512,"Size":2}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := salvage.ParseVolumeMeta(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "salvage: volume.meta: ") {
				t.Fatalf("error does not name its file: %v", err)
			}
			return
		}
		if m.Size <= 0 || m.Head == "" || strings.Contains(m.Head, "/") || m.Head == ".." || m.Format == "" {
			t.Fatalf("accepted %+v from %q", m, data)
		}
	})
}

func FuzzParseLayerMeta(f *testing.F) {
	created := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Add(salvagetest.LayerMeta(salvage.FormatV111, "volume-head-001.img", "volume-snap-a.img", salvagetest.Layer{Removed: true}, created))
	f.Add(salvagetest.LayerMeta(salvage.FormatV010, "volume-head-001.img", "", salvagetest.Layer{}, created))
	f.Add([]byte(`{"Parent":"volume-snap-a.img","Removed":true}`))
	f.Add([]byte(`{"Parent":"../x","Labels":{"a":"b"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := salvage.ParseLayerMeta("x.img.meta", data)
		if err != nil {
			return
		}
		if strings.Contains(m.Parent, "/") || m.Parent == "." || m.Parent == ".." {
			t.Fatalf("accepted a path-like Parent %q", m.Parent)
		}
	})
}

func FuzzParseRevisionCounter(f *testing.F) {
	f.Add(salvagetest.RevisionCounter(0))
	f.Add(salvagetest.RevisionCounter(1 << 40))
	f.Add([]byte("\x00\x0012\x00"))
	f.Add([]byte("-1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := salvage.ParseRevisionCounter(data)
		if err == nil && n < 0 {
			t.Fatalf("negative counter %d from %q", n, data)
		}
	})
}

func TestParseRevisionCounterRoundTrip(t *testing.T) {
	for _, n := range []int64{0, 1, 1500, 1<<63 - 1} {
		if got, err := salvage.ParseRevisionCounter(salvagetest.RevisionCounter(n)); err != nil || got != n {
			t.Errorf("%d: got %d, %v", n, got, err)
		}
	}
	for _, bad := range []string{"", "\x00\x00", "12a", "1 2", "-5", "99999999999999999999"} {
		if _, err := salvage.ParseRevisionCounter([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParseVolumeMetaForms(t *testing.T) {
	cases := map[string]string{
		`{"Size":1,"Head":"h.img","Dirty":true,"Rebuilding":false,"Parent":"","SectorSize":512}`:                                                        "",
		`{"Size":1,"Head":"h.img","Dirty":true,"Rebuilding":false,"Parent":"","SectorSize":512,"BackingFileName":"b"}`:                                  "",
		`{"Size":1,"Head":"h.img","Dirty":true,"Rebuilding":false,"Parent":"","SectorSize":512}` + "\n" + `{}`:                                          "after",
		`{"Size":1,"Head":"h.img","Dirty":true,"Rebuilding":false,"Parent":""}`:                                                                         "SectorSize",
		`{"Size":0,"Head":"h.img","Dirty":true,"Rebuilding":false,"Parent":"","SectorSize":512}`:                                                        "Size 0",
		`{"Size":1,"Head":"h.img","Dirty":"yes","Rebuilding":false,"Parent":"","SectorSize":512}`:                                                       "Dirty",
		`{"Size":1,"Head":"h.img","Dirty":true,"Rebuilding":false,"Parent":"","SectorSize":512,"BackingFileName":"a","BackingFilePath":"b","Error":""}`: "both",
		`{"Size":1,"Head":null,"Dirty":true,"Rebuilding":false,"Parent":"","SectorSize":512}`:                                                           "null",
		`{"Size":1,"Head":"h.img","Head":"g.img","Dirty":true,"Rebuilding":false,"Parent":"","SectorSize":512}`:                                         "duplicate",
		`[1]`: "object",
	}
	for in, want := range cases {
		_, err := salvage.ParseVolumeMeta([]byte(in))
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: err = %v, want %q", in, err, want)
		}
	}
}
