package spdkrpc

import (
	"encoding/json"
	"testing"
)

// TestAppendRequestIsJSONMarshal: the hand-encoded request is byte for
// byte what json.Marshal writes for the JSON-RPC request object, escapes
// and all, so SPDK sees the same bytes as before.
func TestAppendRequestIsJSONMarshal(t *testing.T) {
	type request struct {
		Version string `json:"jsonrpc"`
		Method  string `json:"method"`
		ID      uint64 `json:"id"`
		Params  any    `json:"params,omitempty"`
	}
	var nilPtr *struct{ Name string }
	for _, tc := range []struct {
		method string
		params any
	}{
		{"bdev_lvol_get_lvstores", nil},
		{"bdev_get_bdevs", struct {
			Name string `json:"name"`
		}{"lvs/<a&b>"}},
		{"we\"ird\\method\n<&>\u00e9\u2028", map[string]int{"b": 2, "a": 1}},
		{"m", nilPtr},
		{"", []int{}},
	} {
		for _, id := range []uint64{0, 1, 1<<64 - 1} {
			want, err := json.Marshal(request{"2.0", tc.method, id, tc.params})
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendRequest([]byte("prefix"), tc.method, id, tc.params)
			if err != nil || string(got) != "prefix"+string(want) {
				t.Errorf("appendRequest(%q, %d, %v) = %s, %v; want %s", tc.method, id, tc.params, got, err, want)
			}
		}
	}
	if _, err := appendRequest(nil, "m", 1, func() {}); err == nil {
		t.Error("unencodable params: no error")
	}
}
