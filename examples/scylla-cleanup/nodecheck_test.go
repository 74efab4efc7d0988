package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/examples/internal/cli"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// threeNodes is a stable three-node ring seen from 10.0.0.1, with one
// vnode keyspace to clean.
func threeNodes() tokenringtest.Cluster {
	return tokenringtest.Cluster{Local: "10.0.0.1", Nodes: []tokenringtest.Node{
		{Endpoint: "10.0.0.1", HostID: "h1", Datacenter: "dc1", Rack: "r1", Tokens: []string{"10"}},
		{Endpoint: "10.0.0.2", HostID: "h2", Datacenter: "dc1", Rack: "r1", Tokens: []string{"20"}},
		{Endpoint: "10.0.0.3", HostID: "h3", Datacenter: "dc1", Rack: "r1", Tokens: []string{"30"}},
	}, Keyspaces: []tokenringtest.Keyspace{{Name: "shop"}, {Name: "system", Local: true}}}
}

// posts lists the POST requests (stopping cleanups, starting one) the
// fake received: none may reach a node while the cluster is not stable.
func posts(srv *tokenringtest.Server) []string {
	var out []string
	for _, c := range srv.Calls() {
		if c.Method != http.MethodGet {
			out = append(out, c.Method+" "+c.Path)
		}
	}
	return out
}

// TestRunCleanupRefusesWhenTheClusterIsNotStable: single-node -run-cleanup
// -yes (what a cleanup Job's pod runs) refuses with exit code 4, and sends
// no request that stops or starts a cleanup, while the node's API lists
// a node joining, leaving, moving or down, or while the node cleaned has
// not joined the ring itself; on the same cluster once stable, it cleans.
func TestRunCleanupRefusesWhenTheClusterIsNotStable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*tokenringtest.Cluster)
		want   string
	}{
		{"joining", func(c *tokenringtest.Cluster) {
			c.Nodes = append(c.Nodes, tokenringtest.Node{Endpoint: "10.0.0.4", HostID: "h4", Datacenter: "dc1", Rack: "r1"})
		}, "the ring is changing: joining 10.0.0.4"},
		{"leaving", func(c *tokenringtest.Cluster) { c.Nodes[2].Leaving = true }, "the ring is changing: leaving 10.0.0.3"},
		{"moving", func(c *tokenringtest.Cluster) { c.Nodes[1].Moving = true }, "the ring is changing: moving 10.0.0.2"},
		{"down", func(c *tokenringtest.Cluster) { c.Nodes[1].Down = true }, "1 node down: 10.0.0.2 (down for gossip)"},
		{"this node joining", func(c *tokenringtest.Cluster) {
			c.Nodes = append(c.Nodes, tokenringtest.Node{Endpoint: "10.0.0.4", HostID: "h4", Datacenter: "dc1", Rack: "r1"})
			c.Local = "10.0.0.4"
		}, "node has not joined the token ring"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := threeNodes()
			tc.change(&cluster)
			srv := tokenringtest.NewServer(cluster, tokenringtest.ServerOptions{})
			defer srv.Close()
			var out, errOut bytes.Buffer
			code := runCommand([]string{"-api", srv.URL, "-run-cleanup", "-yes"}, &out, &errOut)
			if code != cli.ExitRefused {
				t.Fatalf("exit code %d, want %d (refused)\nstdout:\n%s\nstderr:\n%s", code, cli.ExitRefused, out.String(), errOut.String())
			}
			if p := posts(srv); len(p) > 0 {
				t.Errorf("requests sent while the cluster was not stable: %v", p)
			}
			if got := srv.Node().Cleaned(); len(got) > 0 {
				t.Errorf("cleaned %v", got)
			}
			for _, want := range []string{"not cleaning " + srv.URL + ", the cluster is not stable", tc.want} {
				if !strings.Contains(errOut.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
				}
			}
			if strings.Contains(out.String(), "cleaning up") {
				t.Errorf("stdout says it cleans:\n%s", out.String())
			}

			// Stable again (the node joined with its tokens, or came
			// back): the same command cleans.
			srv.Node().Update(func(c *tokenringtest.Cluster) {
				stable := threeNodes()
				c.Nodes, c.Local = stable.Nodes, stable.Local
			})
			out.Reset()
			errOut.Reset()
			if code := runCommand([]string{"-api", srv.URL, "-run-cleanup", "-yes"}, &out, &errOut); code != 0 {
				t.Fatalf("stable: exit code %d\n%s\n%s", code, out.String(), errOut.String())
			}
			if len(srv.Node().Cleaned()) == 0 {
				t.Errorf("stable: nothing cleaned\n%s", out.String())
			}
		})
	}
}

// TestRunCleanupRefusesWhenTheRingChangesDuringTheRun: a node's tokens
// enter the ring after the run read its ring hash and before the
// cleanup: the re-read sees another hash and refuses.
func TestRunCleanupRefusesWhenTheRingChangesDuringTheRun(t *testing.T) {
	srv := tokenringtest.NewServer(threeNodes(), tokenringtest.ServerOptions{})
	defer srv.Close()
	target, _ := url.Parse(srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	rings := 0
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxy.ServeHTTP(w, r)
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/storage_service/tokens" {
			if rings++; rings == 1 { // after the run's first read
				srv.Node().Update(func(c *tokenringtest.Cluster) {
					c.Nodes = append(c.Nodes, tokenringtest.Node{Endpoint: "10.0.0.4", HostID: "h4", Datacenter: "dc1", Rack: "r1", Tokens: []string{"15"}})
				})
			}
		}
	}))
	defer front.Close()
	var out, errOut bytes.Buffer
	code := runCommand([]string{"-api", front.URL, "-run-cleanup", "-yes"}, &out, &errOut)
	if code != cli.ExitRefused {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, cli.ExitRefused, out.String(), errOut.String())
	}
	if rings < 2 {
		t.Errorf("the ring was read %d times, want the run's read and the check's", rings)
	}
	if p := posts(srv); len(p) > 0 {
		t.Errorf("requests sent after the ring changed: %v", p)
	}
	if want := "the token ring changed while this run read it"; !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
	}
}
