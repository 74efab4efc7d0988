package lhreplica

import "testing"

// BenchmarkParseVolumeMeta: an engine-written volume.meta through the fast
// path, and the same file through the reference.
func BenchmarkParseVolumeMeta(b *testing.B) {
	data := engineMeta(10 << 30)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ParseVolumeMeta(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parseVolumeMetaRef(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
