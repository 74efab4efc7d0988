package nodecache_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/examples/kube/nodecache"
)

// expiringServer serves a list of Replicas in pages of one, and answers
// the page after the first with what kube-apiserver answers when the
// continue token's resource version was compacted: 410 Gone, reason
// Expired, and in the Status's metadata.continue a token that goes on at
// the latest version (handleCompactedErrorForPaging, k8s.io/apiserver's
// etcd3 store). offer says whether that token is offered.
func expiringServer(t *testing.T, offer bool) (*httptest.Server, *[]string) {
	var mu sync.Mutex
	var asked []string
	page := func(w http.ResponseWriter, name, rv, cont string) {
		fmt.Fprintf(w, `{"apiVersion":"longhorn.io/v1beta2","kind":"ReplicaList","metadata":{"resourceVersion":%q,"continue":%q},"items":[{"apiVersion":"longhorn.io/v1beta2","kind":"Replica","metadata":{"name":%q,"namespace":"ns"}}]}`, rv, cont, name)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.URL.Query().Get("continue")
		mu.Lock()
		asked = append(asked, c)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch c {
		case "":
			page(w, "r-1", "100", "token-at-100")
		case "token-at-100":
			w.WriteHeader(http.StatusGone)
			meta := `{}`
			if offer {
				meta = `{"continue":"token-at-latest"}`
			}
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":%s,"status":"Failure","message":"The provided continue parameter is too old to display a consistent list result.","reason":"Expired","code":410}`, meta)
		case "token-at-latest":
			page(w, "r-2", "180", "")
		default:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &asked
}

// TestListPagesResumesAnExpiredContinue: a list whose continue token
// expired goes on from the API server's inconsistent token, not from the
// first page, and says it is no longer consistent.
func TestListPagesResumesAnExpiredContinue(t *testing.T) {
	srv, asked := expiringServer(t, true)
	dc, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	res, err := nodecache.ListPages(context.Background(), dc.Resource(longhorn.ReplicaGVR).Namespace("ns"), metav1.ListOptions{},
		func(l *unstructured.UnstructuredList) error {
			for _, it := range l.Items {
				names = append(names, it.GetName())
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names) != "[r-1 r-2]" || fmt.Sprint(*asked) != "[ token-at-100 token-at-latest]" {
		t.Fatalf("read %v asking %q; want r-1 then r-2, the first page asked once", names, *asked)
	}
	if res.Pages != 2 || res.Resumed != 1 || res.Consistent() || res.ResourceVersion != "100" {
		t.Fatalf("result %+v, want 2 pages, 1 resumed, not consistent, at 100", res)
	}
}

// TestListPagesExpiredWithoutToken: a 410 that offers no token to go on
// with is returned, not read as the end of the list.
func TestListPagesExpiredWithoutToken(t *testing.T) {
	srv, _ := expiringServer(t, false)
	dc, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = nodecache.ListPages(context.Background(), dc.Resource(longhorn.ReplicaGVR).Namespace("ns"), metav1.ListOptions{},
		func(*unstructured.UnstructuredList) error { return nil })
	if err == nil {
		t.Fatal("an expired list without a token to go on with succeeded")
	}
}
