package mgmtapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/mgmtapi"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// TestCleanerConformance: the Cleaner, against the fake Management API
// with jobs that take two status reads to finish, honours the
// tokenring.Cleaner contract, as the ScyllaDB client does against its fake.
func TestCleanerConformance(t *testing.T) {
	tokenringtest.RunConformanceTests(t, tokenringtest.Harness{
		Cleaner: func(t *testing.T, c tokenringtest.Cluster) tokenringtest.CleanerHarness {
			srv, cl := serve(t, c, tokenringtest.MgmtServerOptions{JobPolls: 2}, mgmtapi.Options{PollInterval: time.Millisecond})
			return tokenringtest.CleanerHarness{
				Cleaner: cl,
				Cleaned: srv.Cleaned,
				FailCleanup: func(ks string) {
					srv.FailCleanup(ks, "java.lang.RuntimeException: compaction failed")
				},
			}
		},
	})
}

// serve starts a fake Management API presenting c and a Cleaner for it.
func serve(t *testing.T, c tokenringtest.Cluster, sopts tokenringtest.MgmtServerOptions, copts mgmtapi.Options) (*tokenringtest.MgmtServer, *mgmtapi.Cleaner) {
	t.Helper()
	srv := tokenringtest.NewMgmtServer(c, sopts)
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("fake server is not on loopback: %s", srv.URL)
	}
	cl, err := mgmtapi.New(srv.URL, copts)
	if err != nil {
		t.Fatal(err)
	}
	return srv, cl
}

func cluster() tokenringtest.Cluster {
	return tokenringtest.Cluster{
		Local: "10.0.0.1",
		Nodes: []tokenringtest.Node{{Endpoint: "10.0.0.1", HostID: "h1", Datacenter: "dc1", Rack: "r1", Tokens: []string{"1"}}},
		Keyspaces: []tokenringtest.Keyspace{
			{Name: "system", Local: true}, {Name: "system_schema", Local: true},
			{Name: "system_auth"}, {Name: "shop"},
		},
	}
}

// The requests go out in the Management API's shapes: the v1 cleanup
// with a JSON KeyspaceRequest and Accept text/plain, the job status by
// job_id, the keyspace listing filtered by keyspaceName.
func TestGoldenRequests(t *testing.T) {
	srv, cl := serve(t, cluster(), tokenringtest.MgmtServerOptions{JobPolls: 1}, mgmtapi.Options{PollInterval: time.Millisecond, Jobs: 2})
	if err := cl.CleanupKeyspace(context.Background(), "shop"); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("requests = %+v; want the existence check, the cleanup and two status reads", reqs)
	}
	if r := reqs[0]; r.Method != "GET" || r.Path != "/api/v0/ops/keyspace" || r.Query != "keyspaceName=shop" {
		t.Errorf("existence check = %+v", r)
	}
	post := reqs[1]
	if post.Method != "POST" || post.Path != "/api/v1/ops/keyspace/cleanup" || post.Query != "" ||
		post.ContentType != "application/json" || post.Accept != "text/plain" {
		t.Errorf("cleanup request = %+v", post)
	}
	if want := `{"keyspace_name":"shop","tables":[],"jobs":2}`; post.Body != want {
		t.Errorf("cleanup body = %s, want %s", post.Body, want)
	}
	jobs := srv.Jobs()
	if len(jobs) != 1 || jobs[0].Keyspace != "shop" || jobs[0].Status != tokenringtest.MgmtJobCompleted || jobs[0].Polls != 2 {
		t.Fatalf("jobs = %+v", jobs)
	}
	for _, r := range reqs[2:] {
		if r.Method != "GET" || r.Path != "/api/v0/ops/executor/job" || r.Query != "job_id="+jobs[0].ID {
			t.Errorf("status read = %+v, want job_id=%s", r, jobs[0].ID)
		}
	}
	if got := srv.Cleaned(); len(got) != 1 || got[0] != "shop" {
		t.Errorf("cleaned = %v", got)
	}
}

// The listing skips what the replication says is LocalStrategy, and keeps
// replicated system keyspaces, as Cassandra's cleanup of every keyspace.
func TestCleanupKeyspacesReadsReplication(t *testing.T) {
	srv, cl := serve(t, cluster(), tokenringtest.MgmtServerOptions{}, mgmtapi.Options{})
	srv.Override("GET", "/api/v0/ops/keyspace", 200, `["system","system_schema","system_auth","shop","ghost","node_local"]`)
	srv.Override("GET", "/api/v0/ops/keyspace/replication", 200, `{"class":"org.apache.cassandra.locator.NetworkTopologyStrategy","dc1":"3"}`)
	got, err := cl.CleanupKeyspaces(context.Background())
	if err != nil || strings.Join(got, ",") != "system_auth,shop,ghost,node_local" {
		t.Errorf("CleanupKeyspaces = %v, %v", got, err)
	}
	for _, r := range srv.Requests() {
		if r.Path == "/api/v0/ops/keyspace/replication" && (r.Query == "keyspaceName=system" || r.Query == "keyspaceName=system_schema") {
			t.Errorf("read the replication of a keyspace the API never cleans: %+v", r)
		}
	}

	srv.Override("GET", "/api/v0/ops/keyspace/replication", 0, "")
	srv.Override("GET", "/api/v0/ops/keyspace", 200, `["shop","node_local","ghost"]`)
	srv.SetCluster(tokenringtest.Cluster{Keyspaces: []tokenringtest.Keyspace{{Name: "shop"}, {Name: "node_local", Local: true}}})
	got, err = cl.CleanupKeyspaces(context.Background())
	if err != nil || strings.Join(got, ",") != "shop" {
		t.Errorf("CleanupKeyspaces with a LocalStrategy keyspace and one dropped after the listing = %v, %v; want [shop]", got, err)
	}

	srv.Override("GET", "/api/v0/ops/keyspace/replication", 404, "")
	if _, err := cl.CleanupKeyspaces(context.Background()); err == nil || errors.Is(err, tokenring.ErrKeyspaceNotFound) || !errors.Is(err, tokenring.ErrNotFound) {
		t.Errorf("CleanupKeyspaces when the replication path is not served: %v, want ErrNotFound and not a dropped keyspace", err)
	}
	srv.Override("GET", "/api/v0/ops/keyspace/replication", 200, `{"replication_factor":"3"}`)
	if _, err := cl.CleanupKeyspaces(context.Background()); !errors.Is(err, tokenring.ErrMalformedReply) {
		t.Errorf("CleanupKeyspaces with a replication without class: %v, want ErrMalformedReply", err)
	}
}

// A job that ends in ERROR is a failure, never a cleaned keyspace, and
// never a dropped one while the node still lists the keyspace.
func TestFailedJobIsFailed(t *testing.T) {
	srv, cl := serve(t, cluster(), tokenringtest.MgmtServerOptions{JobPolls: 3}, mgmtapi.Options{PollInterval: time.Millisecond})
	srv.FailCleanup("shop", "java.lang.RuntimeException: Node is involved in cluster membership changes. Not safe to run cleanup.")
	err := cl.CleanupKeyspace(context.Background(), "shop")
	var jobErr *mgmtapi.JobError
	if !errors.As(err, &jobErr) || jobErr.Keyspace != "shop" || !strings.Contains(jobErr.Message, "Not safe to run cleanup") {
		t.Fatalf("CleanupKeyspace of a failing job: %v, want a *JobError with the node's message", err)
	}
	if errors.Is(err, tokenring.ErrKeyspaceNotFound) || !tokenring.IsRetryable(err) {
		t.Errorf("failed job: %v; want retryable and not a dropped keyspace", err)
	}
	if len(srv.Cleaned()) != 0 {
		t.Errorf("a failed job cleaned %v", srv.Cleaned())
	}
	report, err := tokenring.RunCleanup(context.Background(), cl)
	if err == nil || report.Failed["shop"] == nil || strings.Join(report.Cleaned, ",") != "system_auth" {
		t.Errorf("RunCleanup = %+v, %v; want shop failed and system_auth cleaned", report, err)
	}
}

// A keyspace dropped while its job runs fails the job; the node's listing,
// not the error text, then proves it gone: Dropped, not Failed.
func TestKeyspaceDroppedDuringTheJob(t *testing.T) {
	srv := tokenringtest.NewMgmtServer(cluster(), tokenringtest.MgmtServerOptions{JobPolls: 2})
	defer srv.Close()
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fc := clocktesting.NewFakeClock(time.Unix(0, 0))
	cl, err := mgmtapi.New(srv.URL, mgmtapi.Options{Clock: fc, PollInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- cl.CleanupKeyspace(ctx, "shop") }()
	waitForWaiter(t, fc) // first read answered WAITING
	srv.DropKeyspace("shop")
	fc.Step(time.Minute) // second read: WAITING
	waitForWaiter(t, fc)
	fc.Step(time.Minute) // third read: the job ends, in ERROR
	err = <-done
	if !errors.Is(err, tokenring.ErrKeyspaceNotFound) || tokenring.IsRetryable(err) {
		t.Errorf("CleanupKeyspace of a keyspace dropped under its job: %v, want ErrKeyspaceNotFound", err)
	}
}

// A job ID the node forgets (Cassandra restarted) is ErrJobNotFound: not
// done, worth running again.
func TestVanishedJob(t *testing.T) {
	srv := tokenringtest.NewMgmtServer(cluster(), tokenringtest.MgmtServerOptions{JobPolls: 5})
	defer srv.Close()
	fc := clocktesting.NewFakeClock(time.Unix(0, 0))
	cl, err := mgmtapi.New(srv.URL, mgmtapi.Options{Clock: fc, PollInterval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cl.CleanupKeyspace(context.Background(), "shop") }()
	waitForWaiter(t, fc)
	srv.ForgetJobs()
	fc.Step(10 * time.Second)
	err = <-done
	if !errors.Is(err, mgmtapi.ErrJobNotFound) || !tokenring.IsRetryable(err) || errors.Is(err, tokenring.ErrKeyspaceNotFound) {
		t.Errorf("vanished job: %v; want a retryable ErrJobNotFound", err)
	}
	if len(srv.Cleaned()) != 0 {
		t.Errorf("cleaned %v", srv.Cleaned())
	}
}

// Polling waits PollInterval on the injected clock between reads, and a
// cancelled context ends the wait at once with ctx's error.
func TestCancelWhilePolling(t *testing.T) {
	srv := tokenringtest.NewMgmtServer(cluster(), tokenringtest.MgmtServerOptions{JobPolls: 1000})
	defer srv.Close()
	fc := clocktesting.NewFakeClock(time.Unix(0, 0))
	cl, err := mgmtapi.New(srv.URL, mgmtapi.Options{Clock: fc, PollInterval: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.CleanupKeyspace(ctx, "shop") }()
	for i := 1; i <= 3; i++ {
		waitForWaiter(t, fc)
		if got := srv.Jobs()[0].Polls; got != i {
			t.Fatalf("after %d ticks the job was read %d times", i-1, got)
		}
		fc.Step(29 * time.Second)
		if got := srv.Jobs()[0].Polls; got != i {
			t.Fatalf("read %d times before the interval passed", got)
		}
		fc.Step(time.Second)
	}
	waitForWaiter(t, fc)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || tokenring.IsRetryable(err) || errors.Is(err, mgmtapi.ErrJobNotFound) {
			t.Errorf("cancelled while polling: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CleanupKeyspace did not return after its context was cancelled")
	}
	if len(srv.Cleaned()) != 0 {
		t.Errorf("a cancelled wait counted a cleanup: %v", srv.Cleaned())
	}
}

// Replies that are not the documented shapes are ErrMalformedReply, never
// a finished cleanup.
func TestMalformedReplies(t *testing.T) {
	cases := []struct {
		name, method, path string
		status             int
		body               string
	}{
		{"job ID not a UUID", "POST", "/api/v1/ops/keyspace/cleanup", 202, "OK"},
		{"empty job ID", "POST", "/api/v1/ops/keyspace/cleanup", 202, ""},
		{"OK for a keyspace that is not system", "POST", "/api/v1/ops/keyspace/cleanup", 200, "OK"},
		{"200 instead of 202", "POST", "/api/v1/ops/keyspace/cleanup", 200, "d69d1d95-9348-4460-95d2-ae342870fade"},
		{"status null", "GET", "/api/v0/ops/executor/job", 200, "null"},
		{"status truncated", "GET", "/api/v0/ops/executor/job", 200, `{"id":"`},
		{"another job", "GET", "/api/v0/ops/executor/job", 200, `{"id":"d69d1d95-9348-4460-95d2-ae342870fade","type":"CLEANUP","status":"COMPLETED"}`},
		{"number not string", "GET", "/api/v0/ops/executor/job", 200, `{"id":1,"status":"COMPLETED"}`},
		{"listing null", "GET", "/api/v0/ops/keyspace", 200, "null"},
		{"listing trailing data", "GET", "/api/v0/ops/keyspace", 200, `["shop"] ["x"]`},
		{"listing of another keyspace", "GET", "/api/v0/ops/keyspace", 200, `["other"]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, cl := serve(t, cluster(), tokenringtest.MgmtServerOptions{}, mgmtapi.Options{PollInterval: time.Millisecond})
			srv.Override(tc.method, tc.path, tc.status, tc.body)
			err := cl.CleanupKeyspace(context.Background(), "shop")
			if !errors.Is(err, tokenring.ErrMalformedReply) || tokenring.IsRetryable(err) {
				t.Errorf("CleanupKeyspace: %v, want ErrMalformedReply", err)
			}
		})
	}

	t.Run("unknown status", func(t *testing.T) {
		srv, cl := serve(t, cluster(), tokenringtest.MgmtServerOptions{}, mgmtapi.Options{PollInterval: time.Millisecond})
		const id = "d69d1d95-9348-4460-95d2-ae342870fade"
		srv.Override("POST", "/api/v1/ops/keyspace/cleanup", 202, id)
		body, _ := json.Marshal(map[string]string{"id": id, "type": "CLEANUP", "status": "DONE"})
		srv.Override("GET", "/api/v0/ops/executor/job", 200, string(body))
		if err := cl.CleanupKeyspace(context.Background(), "shop"); !errors.Is(err, tokenring.ErrMalformedReply) {
			t.Errorf("status DONE: %v, want ErrMalformedReply", err)
		}
		body, _ = json.Marshal(map[string]string{"id": id, "type": "COMPACTION", "status": "COMPLETED"})
		srv.Override("GET", "/api/v0/ops/executor/job", 200, string(body))
		if err := cl.CleanupKeyspace(context.Background(), "shop"); !errors.Is(err, tokenring.ErrMalformedReply) {
			t.Errorf("a COMPACTION job: %v, want ErrMalformedReply", err)
		}
	})

	t.Run("oversized", func(t *testing.T) {
		srv, cl := serve(t, cluster(), tokenringtest.MgmtServerOptions{}, mgmtapi.Options{MaxReplyBytes: 64})
		srv.Override("GET", "/api/v0/ops/keyspace", 200, `["`+strings.Repeat("k", 100)+`"]`)
		if _, err := cl.CleanupKeyspaces(context.Background()); !errors.Is(err, tokenring.ErrTooLarge) {
			t.Errorf("oversized listing: %v, want ErrTooLarge", err)
		}
	})

	t.Run("redirect", func(t *testing.T) {
		srv, cl := serve(t, cluster(), tokenringtest.MgmtServerOptions{}, mgmtapi.Options{})
		srv.Override("GET", "/api/v0/ops/keyspace", http.StatusFound, "")
		if _, err := cl.CleanupKeyspaces(context.Background()); !errors.Is(err, tokenring.ErrRedirect) {
			t.Errorf("redirect: %v, want ErrRedirect", err)
		}
	})
}

// Status reads that fail (HTTP 500) are tried again on later ticks, up to
// PollFailures in a row; then the job is given up, retryably.
func TestPollFailures(t *testing.T) {
	srv, cl := serve(t, cluster(), tokenringtest.MgmtServerOptions{JobPolls: 1}, mgmtapi.Options{PollInterval: time.Millisecond, PollFailures: 2})
	srv.Override("GET", "/api/v0/ops/executor/job", 500, "Internal connection to Cassandra closed")
	err := cl.CleanupKeyspace(context.Background(), "shop")
	var apiErr *tokenring.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 || !tokenring.IsRetryable(err) {
		t.Fatalf("CleanupKeyspace with failing status reads: %v", err)
	}
	reads := 0
	for _, r := range srv.Requests() {
		if r.Path == "/api/v0/ops/executor/job" {
			reads++
		}
	}
	if reads != 3 {
		t.Errorf("%d status reads, want 3 (the first and two retries)", reads)
	}
}

// The API answers system and system_schema with "OK" and no job: nothing
// to clean, so success for those names; the same reply for another
// keyspace is malformed.
func TestLocalSystemKeyspaceOK(t *testing.T) {
	srv, cl := serve(t, cluster(), tokenringtest.MgmtServerOptions{}, mgmtapi.Options{})
	if err := cl.CleanupKeyspace(context.Background(), "system"); err != nil {
		t.Errorf("CleanupKeyspace(system): %v", err)
	}
	if len(srv.Jobs()) != 0 {
		t.Errorf("jobs %+v for system", srv.Jobs())
	}
}

func TestNewRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "10.0.0.1:8080", "ftp://h", "http://user:pw@h", "user:pw@h:8080", "http://", "http://h?x=1", "http://h#f"} {
		if _, err := mgmtapi.New(u, mgmtapi.Options{}); !errors.Is(err, tokenring.ErrInvalidURL) {
			t.Errorf("New(%q): %v, want ErrInvalidURL", u, err)
		} else if strings.Contains(err.Error(), "pw") {
			t.Errorf("New(%q) leaks the password: %v", u, err)
		}
	}
}

// waitForWaiter waits until the Cleaner waits on the fake clock.
func waitForWaiter(t *testing.T, fc *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !fc.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the Cleaner never waited on the clock")
		}
		time.Sleep(time.Millisecond)
	}
}

// CleanerFor builds each node's Cleaner from its endpoint, as a driver
// cleaning many nodes asks for them.
func TestCleanerFor(t *testing.T) {
	srv := tokenringtest.NewMgmtServer(cluster(), tokenringtest.MgmtServerOptions{})
	defer srv.Close()
	host, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	cleanerFor := mgmtapi.CleanerFor("http", p, mgmtapi.Options{PollInterval: time.Millisecond})
	c, err := cleanerFor(host)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CleanupKeyspace(context.Background(), "shop"); err != nil || len(srv.Cleaned()) != 1 {
		t.Errorf("cleanup through CleanerFor: %v, cleaned %v", err, srv.Cleaned())
	}
	for _, bad := range []func() error{
		func() error { _, err := cleanerFor(""); return err },
		func() error { _, err := mgmtapi.CleanerFor("ftp", 0, mgmtapi.Options{})("10.0.0.1"); return err },
	} {
		if err := bad(); !errors.Is(err, tokenring.ErrInvalidURL) {
			t.Errorf("CleanerFor with a bad endpoint or scheme: %v, want ErrInvalidURL", err)
		}
	}
	if c, err := mgmtapi.CleanerFor("http", 0, mgmtapi.Options{})("fd00::1"); err != nil || c == nil {
		t.Errorf("CleanerFor of an IPv6 endpoint: %v", err)
	}
}
