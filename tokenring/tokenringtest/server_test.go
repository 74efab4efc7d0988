package tokenringtest

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestGenerateTokens(t *testing.T) {
	a, b := GenerateTokens(9, 500), GenerateTokens(9, 500)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("not deterministic")
	}
	seen := map[string]bool{}
	for _, s := range a {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || strconv.FormatInt(v, 10) != s || seen[s] || v == -1<<63 {
			t.Fatalf("bad or repeated token %q", s)
		}
		seen[s] = true
	}
	if reflect.DeepEqual(a[:10], GenerateTokens(10, 10)) {
		t.Fatal("different seeds give the same tokens")
	}
}

func get(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestShapes pins the JSON shapes to ScyllaDB's: arrays of strings, arrays
// of {"key","value"} mappers, bare JSON strings, {"message","code"} errors.
func TestShapes(t *testing.T) {
	s := NewServer(Cluster{Local: "10.0.0.2", Nodes: []Node{
		{Endpoint: "10.0.0.2", HostID: "h2", Datacenter: "dc1", Rack: "r1", Tokens: []string{"100", "-5"}},
		{Endpoint: "10.0.0.1", HostID: "h1", Datacenter: "dc1", Rack: "r2", Tokens: []string{"7"}},
		{Endpoint: "10.0.0.3", HostID: "h3"},
	}}, ServerOptions{})
	defer s.Close()
	c := s.Client()
	for path, want := range map[string]string{
		"/storage_service/tokens":             `["-5","7","100"]`,
		"/storage_service/tokens/10.0.0.2":    `["-5","100"]`,
		"/storage_service/tokens/10.0.0.3":    `[]`,
		"/storage_service/tokens_endpoint":    `[{"key":"-5","value":"10.0.0.2"},{"key":"7","value":"10.0.0.1"},{"key":"100","value":"10.0.0.2"}]`,
		"/storage_service/host_id":            `[{"key":"10.0.0.1","value":"h1"},{"key":"10.0.0.2","value":"h2"}]`,
		"/storage_service/hostid/local":       `"h2"`,
		"/snitch/rack?host=10.0.0.1":          `"r2"`,
		"/snitch/datacenter?host=10.0.0.1":    `"dc1"`,
		"/storage_service/keyspaces?type=all": `[]`,
	} {
		if code, body := get(t, c, s.URL+path, ""); code != 200 || body != want {
			t.Errorf("GET %s = %d %s, want %s", path, code, body, want)
		}
	}
	code, body := get(t, c, s.URL+"/nope", "")
	var e struct {
		Message string `json:"message"`
		Code    int    `json:"code"`
	}
	if code != 404 || json.Unmarshal([]byte(body), &e) != nil || e.Code != 404 || e.Message == "" {
		t.Errorf("unknown path: %d %s", code, body)
	}
}

func TestAgentModeNeedsTheToken(t *testing.T) {
	s := NewServer(Cluster{}, ServerOptions{AuthToken: "t0k"})
	defer s.Close()
	if !strings.HasPrefix(s.URL, "https://127.0.0.1:") {
		t.Fatalf("URL %s", s.URL)
	}
	if code, _ := get(t, s.Client(), s.URL+"/storage_service/tokens", ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d", code)
	}
	if code, _ := get(t, s.Client(), s.URL+"/storage_service/tokens", "t0k"); code != 200 {
		t.Errorf("right token: %d", code)
	}
}
