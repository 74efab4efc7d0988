package spdk

import (
	"encoding/json"
	"net"
	"testing"
)

// FuzzReplyStream feeds arbitrary bytes to a connection's reader as if
// SPDK had sent them: the reader must never panic, must hand the waiting
// call either a reply or an error, and must exit.
func FuzzReplyStream(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":true}` + "\n",
		`{"jsonrpc":"2.0","id":1,"error":{"code":-19,"message":"No such device"}}`,
		`{"jsonrpc":"2.0","id":2,"result":[]}{"jsonrpc":"2.0","id":1,"result":[{"name":"x"}]}`,
		`{"jsonrpc":"2.0","id":1,"result":`,
		`}{`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
		`[` + "\x00",
		`{"jsonrpc":"2.0","id":1e3,"result":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := net.Pipe()
		cn := newConn(client, 1024)
		ch := cn.register(1)
		go func() {
			_, _ = server.Write(data)
			_ = server.Close()
		}()
		rep := <-ch
		<-cn.done
		if rep.err == nil && rep.Error == nil && rep.Result == nil {
			t.Fatalf("waiter got an empty reply from %q", data)
		}
		if rep.err == nil && rep.Version != "2.0" {
			t.Fatalf("reply with version %q delivered", rep.Version)
		}
	})
}

// FuzzClassify decodes arbitrary bytes as a bdev_lvol_get_lvols result and
// classifies it: every lvol must land in exactly one place.
func FuzzClassify(f *testing.F) {
	f.Add([]byte(`[{"alias":"d/r","uuid":"u1","name":"r","lvs":{"name":"d","uuid":"L"}},{"alias":"d/r-snap-s","uuid":"u2","name":"r-snap-s","is_snapshot":true,"lvs":{"name":"d","uuid":"L"}}]`))
	f.Add([]byte(`[{"name":"x-snap-y-snap-z","is_snapshot":true},{"name":"x-snap-y"},{"name":"bi-img"},{"name":"a-expired-12345678"},{"name":""}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var lvols []Lvol
		if json.Unmarshal(data, &lvols) != nil {
			return
		}
		rt := Classify(lvols, nil)
		n := len(rt.BackingImages) + len(rt.Skipped)
		for _, r := range rt.Replicas {
			n += 1 + len(r.Derived)
			if r.Head.UUID == "" || r.Head.IsSnapshot {
				t.Fatalf("bad head %+v", r.Head)
			}
		}
		if n != len(lvols) {
			t.Fatalf("%d lvols in, %d accounted for: %+v", len(lvols), n, rt)
		}
	})
}

// FuzzPurgeOrder decodes arbitrary bytes as a bdev_get_bdevs result and
// plans a purge: it must not panic, and a plan must end with the head and
// never include an lvol twice.
func FuzzPurgeOrder(f *testing.F) {
	f.Add([]byte(`[{"name":"u1","aliases":["d/r"],"product_name":"Logical Volume","uuid":"u1","driver_specific":{"lvol":{"lvol_store_uuid":"L","base_snapshot":"r-snap-s"}}},{"name":"u2","aliases":["d/r-snap-s"],"product_name":"Logical Volume","uuid":"u2","driver_specific":{"lvol":{"lvol_store_uuid":"L","snapshot":true,"clones":["r","r-snap-s"]}}}]`), "r", "u1")
	f.Fuzz(func(t *testing.T, data []byte, name, uuid string) {
		var bdevs []Bdev
		if json.Unmarshal(data, &bdevs) != nil || uuid == "" {
			return
		}
		order, err := PurgeOrder(bdevs, name, uuid)
		if err != nil || len(order) == 0 {
			return
		}
		if last := order[len(order)-1]; last.Name != name || last.UUID != uuid {
			t.Fatalf("plan does not end with the head: %+v", order)
		}
		seen := map[string]bool{}
		for _, l := range order {
			if seen[l.Alias] {
				t.Fatalf("%s twice in %+v", l.Alias, order)
			}
			seen[l.Alias] = true
		}
	})
}
