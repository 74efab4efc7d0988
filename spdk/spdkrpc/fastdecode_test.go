package spdkrpc

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// fastSamples are results in the form SPDK writes them, one per wire type
// the fast path decodes.
var fastSamples = []string{
	`[{"uuid":"0b5dc4a3-f6c5-4b5e-8b4b-6e0d4b7a1c11","name":"disk-1","base_bdev":"disk-1","total_data_clusters":65536,"free_clusters":32768,"block_size":4096,"cluster_size":1048576}]`,
	`[{"alias":"disk-1/r","uuid":"u1","name":"r","creation_time":"x","is_thin_provisioned":true,"is_snapshot":false,"is_clone":true,"is_esnap_clone":false,"is_degraded":false,"num_allocated_clusters":18446744073709551615,"lvs":{"name":"disk-1","uuid":"L"}}]`,
	`[{"name":"e-1","uuid":"U","strip_size_kb":0,"state":"online","raid_level":"raid1","superblock":false,"num_base_bdevs":2,"num_base_bdevs_discovered":2,"num_base_bdevs_operational":2,"base_bdevs_list":[{"name":"a","uuid":"A","is_configured":true,"data_offset":0,"data_size":4294967296},{"name":"","uuid":"","is_configured":false,"data_offset":0,"data_size":0}]}]`,
	`[{"name":"u1","aliases":["disk-1/r"],"product_name":"Logical Volume","block_size":4096,"num_blocks":4294967295,"uuid":"u1","assigned_rate_limits":{"rw_ios_per_sec":0},"claimed":false,"supported_io_types":{"read":true},"driver_specific":{"lvol":{"lvol_store_uuid":"L","base_bdev":"d","thin_provision":true,"num_allocated_clusters":3,"snapshot":false,"clone":true,"base_snapshot":"r-snap-s","clones":[],"esnap_clone":false}}},` +
		`{"name":"e","aliases":[],"product_name":"Raid Volume","driver_specific":{"raid":{"uuid":"R","state":"online","base_bdevs_list":[]}}}]`,
	`[]`, `[{}]`, ` [ { "name" : "x" } ] `, `true`, `false`,
}

// decodeBoth decodes data into a fresh value of each target type with the
// fast path and with json.Unmarshal.
func decodeBoth(data []byte) (fast, ref []any, took []bool, errs []error) {
	for _, newT := range []func() any{
		func() any { return new([]Lvstore) }, func() any { return new([]Lvol) },
		func() any { return new([]RaidBdev) }, func() any { return new([]Bdev) },
		func() any { return new(bool) },
	} {
		f, r := newT(), newT()
		took = append(took, decodeFast(data, f))
		errs = append(errs, json.Unmarshal(data, r))
		fast, ref = append(fast, f), append(ref, r)
	}
	return fast, ref, took, errs
}

// FuzzDecodeFast holds the fast path to json.Unmarshal, the reference:
// whenever it takes a valid JSON value, json.Unmarshal succeeds on it with
// the same result, nil or empty lists alike; when it declines, it leaves
// its target untouched.
func FuzzDecodeFast(f *testing.F) {
	for _, s := range fastSamples {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		`[{"UUID":"x"}]`, `[{"name":"a","name":"b"}]`, `[{"name":"\u0061"}]`, `[{"name":null}]`, `[null]`,
		`[{"block_size":-1}]`, `[{"block_size":1.5}]`, `[{"block_size":1e3}]`, `[{"num_base_bdevs":4294967296}]`,
		`[{"name":"\xff"}]`, `[{"ſtate":"x"}]`, `[{"lvs":null}]`, `[{"aliases":null}]`, `null`, `{}`, `[1]`, `"true"`,
		`[{"driver_specific":{"lvol":null}}]`, `[{"name":"a","aliases":["x",1]}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return // the framer passes only valid JSON
		}
		data = []byte(strings.TrimSpace(string(data))) // as parseReply cuts the result
		fast, ref, took, errs := decodeBoth(data)
		for i := range fast {
			if !took[i] {
				if !reflect.ValueOf(fast[i]).Elem().IsZero() {
					t.Fatalf("%T: declined %q but changed its target to %+v", fast[i], data, fast[i])
				}
				continue
			}
			if errs[i] != nil {
				t.Fatalf("%T: took %q, which json.Unmarshal rejects: %v", fast[i], data, errs[i])
			}
			if !reflect.DeepEqual(fast[i], ref[i]) {
				t.Fatalf("%T from %q:\nfast %+v\nref  %+v", fast[i], data, fast[i], ref[i])
			}
		}
	})
}

// TestDecodeFastTakesWhatSPDKWrites: the plain form goes through the fast
// path (else it would be dead code and the benchmark would not show it).
func TestDecodeFastTakesWhatSPDKWrites(t *testing.T) {
	for _, s := range fastSamples {
		fast, ref, took, errs := decodeBoth([]byte(strings.TrimSpace(s)))
		if !slices.Contains(took, true) {
			t.Errorf("no fast decoding of %s", s)
		}
		for i := range took {
			if took[i] && (errs[i] != nil || !reflect.DeepEqual(fast[i], ref[i])) {
				t.Errorf("%T from %s: fast %+v, ref %+v (%v)", fast[i], s, fast[i], ref[i], errs[i])
			}
		}
	}
}

// TestFastFieldsMatchTags: every field table names exactly the members
// encoding/json reads into its type, so that the fast path neither skips
// a member json.Unmarshal would set nor sets one it would skip.
func TestFastFieldsMatchTags(t *testing.T) {
	check := func(typ reflect.Type, names []string) {
		t.Helper()
		var tags []string
		var walk func(reflect.Type)
		walk = func(typ reflect.Type) {
			for i := range typ.NumField() {
				sf := typ.Field(i)
				if sf.Anonymous {
					walk(sf.Type)
					continue
				}
				tags = append(tags, strings.Split(sf.Tag.Get("json"), ",")[0])
			}
		}
		walk(typ)
		slices.Sort(tags)
		slices.Sort(names)
		if !slices.Equal(tags, names) {
			t.Errorf("%v: tags %v, table %v", typ, tags, names)
		}
	}
	check(reflect.TypeFor[Lvstore](), fieldNames(lvstoreFields))
	check(reflect.TypeFor[Lvol](), fieldNames(lvolFields))
	check(reflect.TypeFor[LvolStoreRef](), fieldNames(lvolStoreRefFields))
	check(reflect.TypeFor[RaidBdev](), fieldNames(raidBdevFields))
	check(reflect.TypeFor[BdevRaidInfo](), fieldNames(raidInfoFields))
	check(reflect.TypeFor[RaidBaseBdev](), fieldNames(raidBaseFields))
	check(reflect.TypeFor[Bdev](), fieldNames(bdevFields))
	check(reflect.TypeFor[BdevDriverSpecific](), fieldNames(driverSpecificFields))
	check(reflect.TypeFor[BdevLvolInfo](), fieldNames(lvolInfoFields))
}

func fieldNames[T any](fields []field[T]) []string {
	var names []string
	for _, f := range fields {
		names = append(names, f.name)
	}
	return names
}

// TestAllocatedClustersAbsentIsNotZero: a count SPDK did not write
// decodes as nil on both decoding paths, never as zero.
func TestAllocatedClustersAbsentIsNotZero(t *testing.T) {
	for _, tc := range []struct {
		json string
		want *uint64
	}{
		{`[{"name":"u","driver_specific":{"lvol":{"lvol_store_uuid":"L"}}}]`, nil},
		{`[{"name":"u","driver_specific":{"lvol":{"lvol_store_uuid":"L","num_allocated_clusters":null}}}]`, nil},
		{`[{"name":"u","driver_specific":{"lvol":{"lvol_store_uuid":"L","num_allocated_clusters":0}}}]`, clusters(0)},
		{`[{"name":"u","driver_specific":{"lvol":{"lvol_store_uuid":"L","num_allocated_clusters":9}}}]`, clusters(9)},
	} {
		fast, ref, took, errs := decodeBoth([]byte(tc.json))
		if errs[3] != nil {
			t.Fatalf("%s: %v", tc.json, errs[3])
		}
		paths := map[string]any{"encoding/json": ref[3]}
		if took[3] { // else the client falls back to encoding/json
			paths["fast"] = fast[3]
		} else if !strings.Contains(tc.json, "null") {
			t.Errorf("%s: the fast path declined it", tc.json)
		}
		for path, v := range paths {
			bdevs := *v.(*[]Bdev)
			got := bdevs[0].DriverSpecific.Lvol.NumAllocatedClusters
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("%s: %s decodes the count as %v, want %v", tc.json, path, got, tc.want)
			}
		}
	}
}

func clusters(n uint64) *uint64 { return &n }
