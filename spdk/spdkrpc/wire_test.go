package spdkrpc_test

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// TestWireTypesSpellSPDKsFields decodes objects written with the keys
// SPDK's writers use (rpc_bdev_lvol_get_lvols and
// rpc_bdev_lvol_get_lvstores in vbdev_lvol_rpc.c, vbdev_lvol_dump_info_json
// in vbdev_lvol.c, raid_bdev_write_info_json in bdev_raid.c,
// rpc_dump_bdev_info in bdev_rpc.c), encodes them again and compares the
// keys: a mistyped json tag loses a key one way or the other. spdktest
// answers with these types, so this is what keeps the fake honest.
func TestWireTypesSpellSPDKsFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		into any
		json string
	}{
		{"bdev_lvol_get_lvols", &spdkrpc.Lvol{}, `{"alias":"lvs0/lvol0","uuid":"u","name":"lvol0","is_thin_provisioned":true,
			"is_snapshot":false,"is_clone":true,"is_esnap_clone":false,"is_degraded":false,"num_allocated_clusters":3,
			"lvs":{"name":"lvs0","uuid":"L"}}`},
		{"bdev_lvol_get_lvstores", &spdkrpc.Lvstore{}, `{"uuid":"L","name":"lvs0","base_bdev":"Malloc0","total_data_clusters":31,
			"free_clusters":30,"block_size":4096,"cluster_size":4194304}`},
		{"bdev_raid_get_bdevs", &spdkrpc.RaidBdev{}, `{"name":"Raid0","uuid":"R","strip_size_kb":64,"state":"online","raid_level":"raid1",
			"superblock":true,"num_base_bdevs":2,"num_base_bdevs_discovered":2,"num_base_bdevs_operational":2,
			"base_bdevs_list":[{"name":"m0","uuid":"B","is_configured":true,"data_offset":2048,"data_size":63488}]}`},
		{"bdev_get_bdevs lvol", &spdkrpc.Bdev{}, `{"name":"u","aliases":["lvs0/lvol0"],"product_name":"Logical Volume","block_size":4096,
			"num_blocks":256,"uuid":"u","claimed":false,"driver_specific":{"lvol":{"lvol_store_uuid":"L","base_bdev":"Malloc0",
			"thin_provision":true,"num_allocated_clusters":3,"snapshot":false,"clone":true,"base_snapshot":"snap0","esnap_clone":false}}}`},
		{"bdev_get_bdevs snapshot", &spdkrpc.Bdev{}, `{"name":"s","aliases":["lvs0/snap0"],"product_name":"Logical Volume","block_size":4096,
			"num_blocks":256,"uuid":"s","claimed":true,"driver_specific":{"lvol":{"lvol_store_uuid":"L","base_bdev":"Malloc0",
			"thin_provision":true,"num_allocated_clusters":3,"snapshot":true,"clone":false,"clones":["lvol0"],"esnap_clone":false}}}`},
		{"bdev_get_bdevs raid", &spdkrpc.Bdev{}, `{"name":"Raid0","aliases":[],"product_name":"Raid Volume","block_size":4096,
			"num_blocks":256,"uuid":"R","claimed":false,"driver_specific":{"raid":{"uuid":"R","strip_size_kb":64,"state":"online",
			"raid_level":"raid1","superblock":true,"num_base_bdevs":1,"num_base_bdevs_discovered":1,"num_base_bdevs_operational":1,
			"base_bdevs_list":[{"name":"m0","uuid":"B","is_configured":true,"data_offset":2048,"data_size":63488}]}}}`},
	} {
		if err := json.Unmarshal([]byte(tc.json), tc.into); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		again, err := json.Marshal(tc.into)
		if err != nil {
			t.Fatal(err)
		}
		var want, got any
		if err := json.Unmarshal([]byte(tc.json), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(again, &got); err != nil {
			t.Fatal(err)
		}
		if w, g := keys("", want), keys("", got); !slices.Equal(w, g) {
			t.Errorf("%s: SPDK writes the keys\n %v\nthe wire type round-trips\n %v", tc.name, w, g)
		}
	}
}

// keys lists the paths of every object key in v, sorted.
func keys(prefix string, v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out = append(out, prefix+k)
			out = append(out, keys(prefix+k+".", v[k])...)
		}
	case []any:
		for _, e := range v {
			out = append(out, keys(prefix+"[].", e)...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
