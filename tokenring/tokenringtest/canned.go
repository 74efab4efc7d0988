package tokenringtest

import (
	"net/http"
	"sync"
)

// cannedReplies are the replies a fake server gives in place of its own
// answer, by "METHOD path" (the path without its query): Server.Override
// and MgmtServer.Override set them. The zero value holds none and is ready
// to use; its methods are safe for concurrent use.
type cannedReplies struct {
	// contentType, when set, is the Content-Type of every canned reply.
	contentType string

	mu sync.Mutex
	m  map[string]cannedReply
}

type cannedReply struct {
	status int
	body   string
}

// set answers method and path with status and body from now on; status 0
// removes the reply.
func (c *cannedReplies) set(method, path string, status int, body string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := method + " " + path
	if status == 0 {
		delete(c.m, key)
		return
	}
	if c.m == nil {
		c.m = map[string]cannedReply{}
	}
	c.m[key] = cannedReply{status: status, body: body}
}

// write answers r with its canned reply, if one is set, and reports
// whether it did.
func (c *cannedReplies) write(w http.ResponseWriter, r *http.Request) bool {
	c.mu.Lock()
	o, ok := c.m[r.Method+" "+r.URL.Path]
	c.mu.Unlock()
	if !ok {
		return false
	}
	if c.contentType != "" {
		w.Header().Set("Content-Type", c.contentType)
	}
	w.WriteHeader(o.status)
	_, _ = w.Write([]byte(o.body))
	return true
}
