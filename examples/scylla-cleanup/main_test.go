package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// TestSaveThenReport runs the tool against the fake API: save a ring, add a
// node, and report who needs cleanup.
func TestSaveThenReport(t *testing.T) {
	nodes := []tokenringtest.Node{
		{Endpoint: "10.0.0.1", HostID: "h1", Datacenter: "dc1", Rack: "r1", Tokens: []string{"10"}},
		{Endpoint: "10.0.0.2", HostID: "h2", Datacenter: "dc1", Rack: "r1", Tokens: []string{"20"}},
		{Endpoint: "10.0.0.3", HostID: "h3", Datacenter: "dc1", Rack: "r1", Tokens: []string{"30"}},
	}
	srv := tokenringtest.NewServer(tokenringtest.Cluster{Local: "10.0.0.1", Nodes: nodes}, tokenringtest.ServerOptions{})
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "before.json")
	ks := keyspaceFlags{}
	if err := ks.Set("shop=SimpleStrategy:2"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(&out, config{api: apiFlag(srv.URL), save: file, timeout: time.Minute, keyspaces: ks}); err != nil {
		t.Fatal(err)
	}
	nodes = append(nodes, tokenringtest.Node{Endpoint: "10.0.0.4", HostID: "h4", Datacenter: "dc1", Rack: "r1", Tokens: []string{"15"}})
	srv.Node().Update(func(c *tokenringtest.Cluster) { c.Nodes = nodes })
	out.Reset()
	if err := run(&out, config{api: apiFlag(srv.URL), baseline: file, timeout: time.Minute, keyspaces: keyspaceFlags{}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"10.0.0.1         no cleanup: unchanged",
		"10.0.0.2         needs cleanup: lost 1 range of shop",
		"10.0.0.3         needs cleanup: lost 1 range of shop",
		"10.0.0.4         no cleanup: only gained 1 range",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if len(srv.Node().Cleaned()) != 0 {
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
	for _, bad := range []string{"a", "=SimpleStrategy:1", "a=SimpleStrategy:x", "a=Nope:1", "a=NetworkTopologyStrategy:dc1",
		"a=SimpleStrategy:0", "a=SimpleStrategy:-1", "a=NetworkTopologyStrategy:dc1=0", "a=NetworkTopologyStrategy:dc1=0,dc2=0",
		"a=NetworkTopologyStrategy:dc1=3,dc2=-1", "a=NetworkTopologyStrategy:dc1=1,dc1=2"} {
		if err := ks.Set(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	// A drained datacenter (factor 0 beside a positive one) is valid.
	if err := ks.Set("b=NetworkTopologyStrategy:dc1=3,dc2=0"); err != nil {
		t.Errorf("drained datacenter refused: %v", err)
	}
}

// TestDatacenterTypoIsRefused: a -keyspace naming a datacenter the ring
// does not have is refused before anything is saved or reported; it used
// to make every node "need cleanup".
func TestDatacenterTypoIsRefused(t *testing.T) {
	srv := tokenringtest.NewServer(tokenringtest.Cluster{Local: "10.0.0.1", Nodes: []tokenringtest.Node{
		{Endpoint: "10.0.0.1", HostID: "h1", Datacenter: "dc1", Rack: "r1", Tokens: []string{"10"}},
		{Endpoint: "10.0.0.2", HostID: "h2", Datacenter: "dc1", Rack: "r2", Tokens: []string{"20"}},
	}}, tokenringtest.ServerOptions{})
	defer srv.Close()
	dir := t.TempDir()
	typo := keyspaceFlags{}
	if err := typo.Set("shop=NetworkTopologyStrategy:DC1=2"); err != nil {
		t.Fatal(err) // the flag alone cannot know the ring's datacenters
	}
	var out bytes.Buffer
	file := filepath.Join(dir, "typo.json")
	err := run(&out, config{api: apiFlag(srv.URL), save: file, timeout: time.Minute, keyspaces: typo})
	if !errors.Is(err, tokenring.ErrUnknownDatacenter) || !strings.Contains(err.Error(), `"DC1"`) {
		t.Fatalf("save with a datacenter typo: %v", err)
	}
	if _, statErr := os.Stat(file); !os.IsNotExist(statErr) {
		t.Errorf("a baseline was saved despite the typo (%v)", statErr)
	}

	good := keyspaceFlags{}
	if err := good.Set("shop=NetworkTopologyStrategy:dc1=2"); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "before.json")
	if err := run(&out, config{api: apiFlag(srv.URL), save: base, timeout: time.Minute, keyspaces: good}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = run(&out, config{api: apiFlag(srv.URL), baseline: base, timeout: time.Minute, keyspaces: typo})
	if !errors.Is(err, tokenring.ErrUnknownDatacenter) || strings.Contains(out.String(), "needs cleanup") {
		t.Fatalf("report with a datacenter typo: %v\n%s", err, out.String())
	}
}

// TestAPIWithoutScheme: "-api 10.0.0.1:10000" gets a message saying the
// scheme is missing and what to write, when the flag is parsed.
func TestAPIWithoutScheme(t *testing.T) {
	var stderr bytes.Buffer
	_, err := parseArgs([]string{"-api", "10.0.0.1:10000"}, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), `has no scheme: write "http://10.0.0.1:10000"`) {
		t.Fatalf("parseArgs: %v", err)
	}
	if _, err := parseArgs([]string{"-api", "https://10.0.0.1:10001", "-keyspace", "a=SimpleStrategy:2"}, io.Discard, &stderr); err != nil {
		t.Fatalf("good flags refused: %v", err)
	}
	if _, err := parseArgs([]string{"-keyspace", "a=SimpleStrategy:0"}, io.Discard, &stderr); err == nil {
		t.Fatal("a replication factor of 0 was accepted")
	}
	err = run(io.Discard, config{api: apiFlag("10.0.0.1:10000"), timeout: time.Minute, keyspaces: keyspaceFlags{}})
	if !errors.Is(err, tokenring.ErrInvalidURL) || !strings.Contains(err.Error(), "-api") {
		t.Fatalf("run: %v", err)
	}
}

// TestRunCleanupHonoursBaseline: with -baseline, -run-cleanup cleans only
// if this node lost ranges, and only the keyspaces it lost them in; -all
// cleans every keyspace the node lists.
func TestRunCleanupHonoursBaseline(t *testing.T) {
	nodes := []tokenringtest.Node{
		{Endpoint: "10.0.0.1", HostID: "h1", Datacenter: "dc1", Rack: "r1", Tokens: []string{"10"}},
		{Endpoint: "10.0.0.2", HostID: "h2", Datacenter: "dc1", Rack: "r1", Tokens: []string{"20"}},
		{Endpoint: "10.0.0.3", HostID: "h3", Datacenter: "dc1", Rack: "r1", Tokens: []string{"30"}},
	}
	keyspaces := []tokenringtest.Keyspace{{Name: "shop"}, {Name: "logs"}, {Name: "system", Local: true}}
	file := filepath.Join(t.TempDir(), "before.json")
	newServer := func(local string) *tokenringtest.Server {
		srv := tokenringtest.NewServer(tokenringtest.Cluster{Local: local, Nodes: nodes, Keyspaces: keyspaces}, tokenringtest.ServerOptions{})
		t.Cleanup(srv.Close)
		return srv
	}
	srv := newServer("10.0.0.1")
	var out, errOut bytes.Buffer
	if code := runCommand([]string{"-api", srv.URL, "-save", file, "-keyspace", "shop=SimpleStrategy:2"}, &out, &errOut); code != 0 {
		t.Fatalf("-save: exit %d: %s", code, errOut.String())
	}
	nodes = append(nodes, tokenringtest.Node{Endpoint: "10.0.0.4", HostID: "h4", Datacenter: "dc1", Rack: "r1", Tokens: []string{"15"}})

	for _, tc := range []struct {
		name    string
		local   string
		args    []string
		code    int
		say     string
		cleaned []string
	}{
		{"unchanged node, -yes", "10.0.0.1", []string{"-yes"}, 0, "no cleanup needed", nil},
		{"unchanged node, dry run", "10.0.0.1", nil, 0, "lost no ranges since the baseline", nil},
		{"unchanged node, -all", "10.0.0.1", []string{"-all", "-yes"}, 0, "cleaned [shop logs]", []string{"shop", "logs"}},
		{"node that lost shop, dry run", "10.0.0.2", nil, 3, "clean 1 keyspace [shop]", nil},
		{"node that lost shop, -yes", "10.0.0.2", []string{"-yes"}, 0, "cleaned [shop]", []string{"shop"}},
		{"node that only gained", "10.0.0.4", []string{"-yes"}, 0, "no cleanup needed", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(tc.local)
			var out, errOut bytes.Buffer
			code := runCommand(append([]string{"-api", srv.URL, "-baseline", file, "-run-cleanup"}, tc.args...), &out, &errOut)
			if code != tc.code || !strings.Contains(out.String(), tc.say) {
				t.Fatalf("exit %d (want %d), stdout lacks %q:\n%s%s", code, tc.code, tc.say, out.String(), errOut.String())
			}
			if got := srv.Node().Cleaned(); !slices.Equal(got, tc.cleaned) {
				t.Fatalf("cleaned %v, want %v", got, tc.cleaned)
			}
		})
	}
}
