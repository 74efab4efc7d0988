package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/tokenring/scyllatest"
)

// TestSaveThenReport runs the tool against the fake API: save a ring, add a
// node, and report who needs cleanup.
func TestSaveThenReport(t *testing.T) {
	srv := scyllatest.NewServer(scyllatest.Options{})
	defer srv.Close()
	nodes := []scyllatest.Node{
		{Endpoint: "10.0.0.1", HostID: "h1", Datacenter: "dc1", Rack: "r1", Tokens: []string{"10"}},
		{Endpoint: "10.0.0.2", HostID: "h2", Datacenter: "dc1", Rack: "r1", Tokens: []string{"20"}},
		{Endpoint: "10.0.0.3", HostID: "h3", Datacenter: "dc1", Rack: "r1", Tokens: []string{"30"}},
	}
	srv.SetNodes("10.0.0.1", nodes)
	file := filepath.Join(t.TempDir(), "before.json")
	ks := keyspaceFlags{}
	if err := ks.Set("shop=SimpleStrategy:2"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(&out, srv.URL, "", "", file, "", false, time.Minute, ks); err != nil {
		t.Fatal(err)
	}
	nodes = append(nodes, scyllatest.Node{Endpoint: "10.0.0.4", HostID: "h4", Datacenter: "dc1", Rack: "r1", Tokens: []string{"15"}})
	srv.SetNodes("10.0.0.1", nodes)
	out.Reset()
	if err := run(&out, srv.URL, "", "", "", file, false, time.Minute, keyspaceFlags{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"10.0.0.1         no cleanup: unchanged",
		"10.0.0.2         needs cleanup: lost 1 ranges of shop",
		"10.0.0.3         needs cleanup: lost 1 ranges of shop",
		"10.0.0.4         no cleanup: only gained 1 ranges",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if len(srv.Cleaned()) != 0 {
		t.Error("cleaned without -run-cleanup")
	}
}

func TestKeyspaceFlag(t *testing.T) {
	ks := keyspaceFlags{}
	if err := ks.Set("a=org.apache.cassandra.locator.NetworkTopologyStrategy:dc1=3,dc2=1"); err != nil {
		t.Fatal(err)
	}
	if r := ks["a"]; r.Datacenters["dc1"] != 3 || r.Datacenters["dc2"] != 1 {
		t.Fatalf("%+v", r)
	}
	for _, bad := range []string{"a", "=SimpleStrategy:1", "a=SimpleStrategy:x", "a=Nope:1", "a=NetworkTopologyStrategy:dc1"} {
		if err := ks.Set(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
