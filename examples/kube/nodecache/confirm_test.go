package nodecache_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/examples/kube/nodecache"
	"github.com/caretaker-storage/caretaker/orphan"
)

// listCounter counts the LISTs of Replicas that select nothing (full
// lists: no labelSelector, no fieldSelector) and those that select.
type listCounter struct {
	next http.RoundTripper

	mu             sync.Mutex
	full, selected int
}

func (c *listCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/replicas") && q.Get("watch") == "" {
		c.mu.Lock()
		if q.Get("labelSelector") == "" && q.Get("fieldSelector") == "" {
			if q.Get("continue") == "" { // a list's first page
				c.full++
			}
		} else {
			c.selected++
		}
		c.mu.Unlock()
	}
	return c.next.RoundTrip(r)
}

func (c *listCounter) fullLists() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.full
}

func countingClient(t *testing.T, cfg *rest.Config) (dynamic.Interface, *listCounter) {
	t.Helper()
	counter := &listCounter{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dc, counter
}

func replica(ns, name string, labels map[string]any, nodeID, diskID, dir string) *unstructured.Unstructured {
	meta := map[string]any{"name": name, "namespace": ns}
	if labels != nil {
		meta["labels"] = labels
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Replica", "metadata": meta,
		"spec": map[string]any{"nodeID": nodeID, "diskID": diskID, "diskPath": "/var/lib/longhorn/", "dataDirectoryName": dir},
	}}
}

// TestConfirmerFindsWhatLabelsHide: on a real API server, the replicas a
// label selector for node-a misses (one labelled with another node, one
// with no labels at all) are found by the confirmation (and only those:
// what the narrow view holds leaves the expected set when it is deleted), which lists every
// Replica once for a sweep with a new candidate and once before a sweep's
// first purge, and never for a sweep whose candidates an earlier
// confirmation covered, or that has none.
func TestConfirmerFindsWhatLabelsHide(t *testing.T) {
	c := kubetest.Require(t)
	admin, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	ns := kubetest.Namespace(t, admin, "confirm")
	ctx := context.Background()
	const disk = "uuid-a1"
	for _, r := range []*unstructured.Unstructured{
		replica(ns, "good", map[string]any{"longhornnode": "node-a", "longhorndiskuuid": disk}, "node-a", disk, "good-0001"),
		replica(ns, "stale", map[string]any{"longhornnode": "node-b", "longhorndiskuuid": "uuid-b1"}, "node-a", disk, "stale-0002"),
		replica(ns, "bare", nil, "node-a", disk, "bare-0003"),
		replica(ns, "other", map[string]any{"longhornnode": "node-b", "longhorndiskuuid": "uuid-b1"}, "node-b", "uuid-b1", "other-0004"),
	} {
		if _, err := admin.Resource(longhorn.ReplicaGVR).Namespace(ns).Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dc, counter := countingClient(t, c.Config)
	ri := dc.Resource(longhorn.ReplicaGVR).Namespace(ns)

	// The narrow view: what the labels select.
	narrow, err := ri.List(ctx, metav1.ListOptions{LabelSelector: "longhornnode=node-a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(narrow.Items) != 1 || narrow.Items[0].GetName() != "good" {
		t.Fatalf("the node's label selects %d replicas, want only good", len(narrow.Items))
	}

	var claimsChanged int
	conf := nodecache.NewConfirmer(ri, func(r diskscan.ReplicaRef) bool { return r.NodeID == "node-a" || r.DiskID == disk },
		func(r diskscan.ReplicaRef) bool { return r.Name == "good" }, // what the narrow view holds
		func([]diskscan.ReplicaRef) { claimsChanged++ })
	expectLists := func(want int, when string) {
		t.Helper()
		if got := counter.fullLists(); got != want {
			t.Fatalf("%s: %d full lists, want %d", when, got, want)
		}
		if conf.FullLists() != int64(want) {
			t.Fatalf("%s: the confirmer counts %d, want %d", when, conf.FullLists(), want)
		}
	}

	// Steady state: no candidates, no list.
	conf.BeginSweep()
	if changed, err := conf.Candidates(ctx, nil); err != nil || changed {
		t.Fatalf("no candidates: changed %v, err %v", changed, err)
	}
	expectLists(0, "a sweep without candidates")

	// The narrow view thinks stale's and bare's directories orphans.
	cands := map[string]bool{disk + "/stale-0002": true, disk + "/bare-0003": true}
	conf.BeginSweep()
	changed, err := conf.Candidates(ctx, cands)
	if err != nil || !changed || claimsChanged != 1 {
		t.Fatalf("new candidates: changed %v (hook %d), err %v; want the claims changed", changed, claimsChanged, err)
	}
	expectLists(1, "a sweep with new candidates")
	var names []string
	for _, r := range conf.Claims() {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "bare,stale" {
		t.Fatalf("claims %v, want bare and stale (not good, which the narrow view holds, nor another node's)", names)
	}
	// The same sweep's purge needs no other list.
	if err := conf.BeforePurge(ctx); err != nil {
		t.Fatal(err)
	}
	expectLists(1, "a purge in the confirmed sweep")

	// Later sweeps with the same candidates, or fewer: no list.
	for range 3 {
		conf.BeginSweep()
		if _, err := conf.Candidates(ctx, map[string]bool{disk + "/bare-0003": true}); err != nil {
			t.Fatal(err)
		}
	}
	expectLists(1, "sweeps whose candidates were covered")

	// A new candidate, and then a purge in a later sweep: one list each.
	conf.BeginSweep()
	if changed, err := conf.Candidates(ctx, map[string]bool{disk + "/bare-0003": true, disk + "/new-0005": true}); err != nil || changed {
		t.Fatalf("a new candidate: changed %v, err %v; want a list with the same claims", changed, err)
	}
	expectLists(2, "a sweep with one new candidate")
	conf.BeginSweep()
	if err := conf.BeforePurge(ctx); err != nil {
		t.Fatal(err)
	}
	if err := conf.BeforePurge(ctx); err != nil {
		t.Fatal(err)
	}
	expectLists(3, "two purges in a later sweep")
	if claimsChanged != 1 {
		t.Fatalf("the claims hook ran %d times, want once (the claims did not change after)", claimsChanged)
	}
}

// TestConfirmingDeleterRefusesWithoutAList: when the full list fails,
// the purge is not attempted.
func TestConfirmingDeleterRefusesWithoutAList(t *testing.T) {
	c := kubetest.Require(t)
	cfg := rest.CopyConfig(c.Config)
	cfg.BearerToken = "not-a-token" // every request is refused
	cfg.BearerTokenFile = ""
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conf := nodecache.NewConfirmer(dc.Resource(longhorn.ReplicaGVR).Namespace("default"), func(diskscan.ReplicaRef) bool { return true }, nil, nil)
	conf.BeginSweep()
	inner := &recordingDeleter{}
	err = nodecache.ConfirmingDeleter{Deleter: inner, C: conf}.Delete(context.Background(), orphan.Record{Name: "x"})
	if !errors.Is(err, nodecache.ErrUnconfirmed) || inner.calls != 0 {
		t.Fatalf("got %v with %d deletes, want ErrUnconfirmed and none", err, inner.calls)
	}
}

type recordingDeleter struct{ calls int }

func (d *recordingDeleter) Delete(context.Context, orphan.Record) error { d.calls++; return nil }
