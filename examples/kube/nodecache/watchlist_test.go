package nodecache_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/examples/kube/nodecache"
)

// countedConn counts the bytes read from the API server's connection:
// what crossed the wire, compressed or not.
type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// wireClient is a client whose connections count the bytes they read.
func wireClient(t *testing.T, cfg *rest.Config) (dynamic.Interface, *atomic.Int64) {
	t.Helper()
	n := new(atomic.Int64)
	cfg = rest.CopyConfig(cfg)
	d := net.Dialer{}
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countedConn{c, n}, nil
	}
	cfg.QPS, cfg.Burst = -1, 0
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dc, n
}

// errNoWatchList is watchList's answer when the server does not stream
// the initial state: the caller lists instead.
var errNoWatchList = errors.New("the API server does not support watch-list")

// watchList reads ri's objects as a watch-list (sendInitialEvents, a
// watch that begins with every object as an ADDED event and marks the
// end of the initial state with a bookmark annotated
// k8s.io/initial-events-end; kube-apiserver's WatchList feature). It
// returns the objects' names and the bookmark's resource version, or
// errNoWatchList when the server refused the request or closed the
// stream before the bookmark.
func watchList(ctx context.Context, ri dynamic.ResourceInterface) ([]string, string, error) {
	yes := true
	w, err := ri.Watch(ctx, metav1.ListOptions{
		SendInitialEvents:    &yes,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	})
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", errNoWatchList, err)
	}
	defer w.Stop()
	var names []string
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added:
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				return nil, "", fmt.Errorf("an event carried %T", ev.Object)
			}
			names = append(names, u.GetName())
		case watch.Bookmark:
			u, ok := ev.Object.(*unstructured.Unstructured)
			if ok && u.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				return names, u.GetResourceVersion(), nil
			}
		case watch.Error:
			return nil, "", fmt.Errorf("%w: %v", errNoWatchList, ev.Object)
		}
	}
	return nil, "", fmt.Errorf("%w: the stream ended before the initial events' bookmark", errNoWatchList)
}

// TestWatchListAgainstPagedList is issue 37's trial of watch-list for
// the confirmation's full list, on the test's kube-apiserver (1.34.2):
// 2,000 Replicas read alternately as ListPages reads them (pages of 500,
// gzip as client-go asks) and as a watch-list. Both must read the same
// objects; the test logs the bytes on the wire and the time of each.
// The watch-list carried 13 times the bytes (a watch stream is not
// gzipped) and was no faster, so the Confirmer keeps ListPages (see the
// package doc's Restart storms).
func TestWatchListAgainstPagedList(t *testing.T) {
	if os.Getenv("CARETAKER_SCALE_REPORT") == "" {
		t.Skip("set CARETAKER_SCALE_REPORT=1 to measure watch-list against the paged list")
	}
	c := kubetest.Require(t)
	admin, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	ns := kubetest.Namespace(t, admin, "watchlist")
	ctx := context.Background()
	const n = 2000
	created := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			r := replica(ns, fmt.Sprintf("r-%04d", i), map[string]any{"longhornnode": fmt.Sprintf("node-%02d", i%60)},
				fmt.Sprintf("node-%02d", i%60), fmt.Sprintf("uuid-%02d", i%60), fmt.Sprintf("vol-%04d-0a1b2c3d", i))
			_, err := admin.Resource(longhorn.ReplicaGVR).Namespace(ns).Create(ctx, r, metav1.CreateOptions{})
			created <- err
		}()
	}
	for range n {
		if err := <-created; err != nil {
			t.Fatal(err)
		}
	}
	dc, wire := wireClient(t, c.Config)
	ri := dc.Resource(longhorn.ReplicaGVR).Namespace(ns)

	type run struct {
		bytes int64
		took  time.Duration
	}
	var lists, watches []run
	for range 3 {
		b0, t0 := wire.Load(), time.Now()
		var listed []string
		if _, err := nodecache.ListPages(ctx, ri, metav1.ListOptions{}, func(p *unstructured.UnstructuredList) error {
			for i := range p.Items {
				listed = append(listed, p.Items[i].GetName())
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		lists = append(lists, run{wire.Load() - b0, time.Since(t0)})

		b0, t0 = wire.Load(), time.Now()
		streamed, rv, err := watchList(ctx, ri)
		if err != nil {
			t.Skipf("no watch-list on this server (a host falls back to ListPages): %v", err)
		}
		watches = append(watches, run{wire.Load() - b0, time.Since(t0)})
		sort.Strings(listed)
		sort.Strings(streamed)
		if len(listed) != n || len(streamed) != n || fmt.Sprint(listed) != fmt.Sprint(streamed) {
			t.Fatalf("the paged list read %d replicas, the watch-list %d (at %s); want the same %d", len(listed), len(streamed), rv, n)
		}
	}
	for i := range lists {
		t.Logf("%d replicas: paged list %d KiB in %s; watch-list %d KiB in %s", n,
			lists[i].bytes/1024, lists[i].took.Round(time.Millisecond), watches[i].bytes/1024, watches[i].took.Round(time.Millisecond))
	}
}
