package kubetest_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/rest"

	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// TestEtcdAnswersWatchProgress: the etcd under test is one kube-apiserver
// v1.34 sends watch progress requests to, so that it serves consistent
// lists from its watch cache as in a real cluster. kube-apiserver decides
// by etcd's version (endpointSupportsRequestWatchProgress in
// k8s.io/apiserver/pkg/storage/feature/feature_support_checker.go: 3.4.31+
// or 3.5.13+, after etcd-io/etcd#15220 and #17507); Debian's etcd 3.4.23
// is older, and the server then logs "RequestWatchProgress feature is not
// supported".
func TestEtcdAnswersWatchProgress(t *testing.T) {
	c := kubetest.Require(t)
	resp, err := http.Get(c.EtcdURL + "/version")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Server string `json:"etcdserver"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	got, err := version.ParseSemantic(v.Server)
	if err != nil {
		t.Fatalf("etcd version %q: %v", v.Server, err)
	}
	if got.LessThan(version.MustParseSemantic("3.4.31")) ||
		got.AtLeast(version.MustParseSemantic("3.5.0")) && got.LessThan(version.MustParseSemantic("3.5.13")) {
		t.Errorf("etcd %s cannot answer watch progress requests (needs 3.4.31+ or 3.5.13+); run `make kube-test`, which builds etcd %s", got, kubetest.EtcdVersion)
	}
	log, err := os.ReadFile(filepath.Join(c.Dir, "kube-apiserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "RequestWatchProgress feature is not supported") {
		t.Error("kube-apiserver's log says etcd does not support watch progress requests")
	}
}

// TestPriorityAndFairnessOn: the API server classifies requests with API
// priority and fairness, as a real cluster does, so that a burst is
// queued or answered 429 rather than served without limit. Every answer
// then names the priority level that admitted it.
func TestPriorityAndFairnessOn(t *testing.T) {
	c := kubetest.Require(t)
	rt, err := rest.TransportFor(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, c.Config.Host+"/api/v1/namespaces", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET namespaces: %s", resp.Status)
	}
	if resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID") == "" {
		t.Errorf("no X-Kubernetes-PF-PriorityLevel-UID header: priority and fairness is off (headers %v)", resp.Header)
	}
}
