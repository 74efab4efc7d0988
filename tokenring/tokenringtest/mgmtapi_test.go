package tokenringtest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// The fake answers in the Management API's wire shapes: status codes,
// content types and bodies of management-api-server's resources.
func TestMgmtServerGoldenReplies(t *testing.T) {
	c := tokenringtest.Cluster{Local: "10.0.0.1", Keyspaces: []tokenringtest.Keyspace{
		{Name: "system", Local: true}, {Name: "shop"}, {Name: "tabular", Tablets: true},
	}}
	fc := clocktesting.NewFakePassiveClock(time.UnixMilli(1700000000123))
	srv := tokenringtest.NewMgmtServer(c, tokenringtest.MgmtServerOptions{JobPolls: 1, Clock: fc})
	defer srv.Close()

	call := func(method, path, contentType, accept, body string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	expect := func(what string, gotStatus int, gotType, gotBody string, status int, ctype, body string) {
		t.Helper()
		if gotStatus != status || gotType != ctype || strings.TrimSpace(gotBody) != body {
			t.Errorf("%s = %d %s %q, want %d %s %q", what, gotStatus, gotType, gotBody, status, ctype, body)
		}
	}

	st, ct, body := call("GET", "/api/v0/ops/keyspace", "", "application/json", "")
	expect("keyspace list", st, ct, body, 200, "application/json", `["system","shop"]`)
	st, ct, body = call("GET", "/api/v0/ops/keyspace?keyspaceName=gone", "", "", "")
	expect("keyspace list of a missing keyspace", st, ct, body, 200, "application/json", `[]`)
	st, ct, body = call("GET", "/api/v0/ops/keyspace/replication?keyspaceName=system", "", "", "")
	expect("replication of system", st, ct, body, 200, "application/json", `{"class":"org.apache.cassandra.locator.LocalStrategy"}`)
	st, ct, body = call("GET", "/api/v0/ops/keyspace/replication?keyspaceName=gone", "", "", "")
	expect("replication of a missing keyspace", st, ct, body, 404, "text/plain", "Get keyspace replication failed. Keyspace 'gone' does not exist.")

	req := `{"keyspace_name":"shop","tables":[],"jobs":1}`
	st, _, _ = call("POST", "/api/v1/ops/keyspace/cleanup", "", "text/plain", req)
	if st != http.StatusUnsupportedMediaType {
		t.Errorf("cleanup without a JSON content type: HTTP %d, want 415", st)
	}
	st, _, _ = call("POST", "/api/v1/ops/keyspace/cleanup", "application/json", "application/json", req)
	if st != http.StatusNotAcceptable {
		t.Errorf("cleanup accepting only JSON: HTTP %d, want 406 (it produces text/plain)", st)
	}
	st, ct, body = call("POST", "/api/v1/ops/keyspace/cleanup", "application/json", "", `{"keyspace_name":"SYSTEM"}`)
	expect("cleanup of system", st, ct, body, 200, "text/plain", "OK")

	st, ct, id := call("POST", "/api/v1/ops/keyspace/cleanup", "application/json", "text/plain", req)
	if st != http.StatusAccepted || ct != "text/plain" || !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("cleanup = %d %s %q, want 202 text/plain and a UUID", st, ct, id)
	}
	st, ct, body = call("GET", "/api/v0/ops/executor/job?job_id="+id, "", "", "")
	expect("job status while waiting", st, ct, body, 200, "application/json",
		`{"end_time":"0","id":"`+id+`","status":"WAITING","submit_time":"1700000000123","type":"CLEANUP"}`)
	fc.SetTime(time.UnixMilli(1700000060000))
	st, ct, body = call("GET", "/api/v0/ops/executor/job?job_id="+id, "", "", "")
	expect("job status when done", st, ct, body, 200, "application/json",
		`{"end_time":"1700000060000","id":"`+id+`","status":"COMPLETED","submit_time":"1700000000123","type":"CLEANUP"}`)
	if got := srv.Cleaned(); !slices.Equal(got, []string{"shop"}) {
		t.Errorf("cleaned %v", got)
	}

	srv.FailCleanup("shop", "java.lang.RuntimeException: boom")
	_, _, id = call("POST", "/api/v1/ops/keyspace/cleanup", "application/json", "", req)
	call("GET", "/api/v0/ops/executor/job?job_id="+id, "", "", "")
	_, _, body = call("GET", "/api/v0/ops/executor/job?job_id="+id, "", "", "")
	var job map[string]string
	if err := json.Unmarshal([]byte(body), &job); err != nil || job["status"] != "ERROR" || job["error"] != "java.lang.RuntimeException: boom" {
		t.Errorf("failed job = %s", body)
	}
	if got := srv.Cleaned(); !slices.Equal(got, []string{"shop"}) {
		t.Errorf("a failed job counted as cleaned: %v", got)
	}

	srv.ForgetJobs()
	st, ct, body = call("GET", "/api/v0/ops/executor/job?job_id="+id, "", "", "")
	expect("job status of a forgotten job", st, ct, body, 404, "application/json", `{}`)
}
