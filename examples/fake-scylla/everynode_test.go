package main

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/tokenring"
)

// TestNineNodesEveryNode serves the nine-node scenario as every node:
// each printed URL answers as its own node, in its own rack.
func TestNineNodesEveryNode(t *testing.T) {
	u, out, stop := serve(t, "-scenario", "nine-nodes", "-every-node")
	lines := regexp.MustCompile(`(?m)^node (\S+): url (\S+)$`).FindAllStringSubmatch(out.String(), -1)
	if len(lines) != 9 || !strings.Contains(out.String(), "url: "+u) || !strings.Contains(out.String(), "ready: every node of 9 nodes") {
		t.Fatalf("printed:\n%s", out.String())
	}
	ctx := context.Background()
	racks := map[string]int{}
	for _, l := range lines {
		c, err := tokenring.NewClient(l[2], tokenring.ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, m, err := tokenring.ReadTokenRingHash(ctx, c)
		if err != nil || m.Endpoint != l[1] || m.OwnTokens != 8 {
			t.Fatalf("%s answers as %+v, %v", l[1], m, err)
		}
		loc, err := c.Location(ctx, l[1])
		if err != nil {
			t.Fatal(err)
		}
		racks[loc.Rack]++
	}
	if racks["r1"] != 3 || racks["r2"] != 3 || racks["r3"] != 3 {
		t.Fatalf("racks %v", racks)
	}
	// One line holds every node's flag for scylla-cleanup, ready to paste.
	var want []string
	for _, l := range lines {
		want = append(want, "-node-api "+l[1]+"="+l[2])
	}
	slices.Sort(want)
	if !strings.Contains(out.String(), "\nflags: "+strings.Join(want, " ")+"\n") {
		t.Errorf("no flags line of the nine nodes:\n%s", out.String())
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if _, _, err := tokenring.ReadTokenRingHash(ctx, mustClient(t, lines[4][2])); err == nil {
		t.Error("a node still served after stop")
	}
}

func TestEveryNodeNeedsAFreePort(t *testing.T) {
	var out, errOut strings.Builder
	code := runCommand(context.Background(), []string{"-every-node", "-addr", "127.0.0.1:10000"}, &out, &errOut, nil)
	if code != 2 || !strings.Contains(errOut.String(), "port 0") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}

func mustClient(t *testing.T, u string) *tokenring.Client {
	t.Helper()
	c, err := tokenring.NewClient(u, tokenring.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
