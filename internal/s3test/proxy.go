package s3test

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault is what a Proxy does to one request instead of, or on top of,
// passing it to the server. The zero Fault passes the request through.
type Fault struct {
	// Delay holds the request this long before anything else (a slow
	// server or listing); the wait ends early if the client gives up.
	Delay time.Duration
	// Forward passes the request to the server first and then answers with
	// the fault instead of the server's response: the server did the work
	// and the client never heard (a lost response).
	Forward bool

	// Status, with Code and Message, answers with an S3 error: that HTTP
	// status and an XML <Error> body carrying Code (no body to a HEAD).
	Status  int
	Code    string
	Message string

	// Truncate passes the request through and sends the server's response
	// headers, including its Content-Length, but only the first half of
	// the body, then closes the connection.
	Truncate bool
	// Drop closes the client's connection without any answer.
	Drop bool
	// Redirect answers 307 Temporary Redirect with Location set to this
	// base URL (another host) plus the request's path and query.
	Redirect string
	// Body answers with this body and status 200 (or Status if set), as
	// application/xml: an oversized or malformed listing.
	Body []byte
	// Rewrite passes the request through and answers with the server's
	// status and headers and, for a 200, the body Rewrite makes of the
	// server's (Content-Length set to match): a gateway or cache that
	// changes answers. See DropListed and EndListing.
	Rewrite func(body []byte) []byte
}

// DropListed is a Fault for ListObjectsV2 requests that removes the
// object key from the listing, if it is there: a gateway or cache whose
// listing lost an entry while the object is still there.
func DropListed(key string) *Fault {
	return &Fault{Rewrite: func(body []byte) []byte {
		return contentsEntry.ReplaceAllFunc(body, func(entry []byte) []byte {
			if bytes.Contains(entry, []byte("<Key>"+xmlEscape(key)+"</Key>")) {
				return nil
			}
			return entry
		})
	}}
}

// EndListing is a Fault for ListObjectsV2 requests that marks every page
// complete (IsTruncated false, no NextContinuationToken), whatever
// follows it: a gateway that cuts listings at the page size.
func EndListing() *Fault {
	return &Fault{Rewrite: func(body []byte) []byte {
		body = truncatedTrue.ReplaceAll(body, []byte("<IsTruncated>false</IsTruncated>"))
		return nextToken.ReplaceAll(body, nil)
	}}
}

var (
	contentsEntry = regexp.MustCompile(`(?s)<Contents>.*?</Contents>`)
	truncatedTrue = regexp.MustCompile(`<IsTruncated>true</IsTruncated>`)
	nextToken     = regexp.MustCompile(`(?s)<NextContinuationToken>.*?</NextContinuationToken>`)
)

// SlowDown is S3's throttling answer: 503 SlowDown.
func SlowDown() *Fault {
	return &Fault{Status: http.StatusServiceUnavailable, Code: "SlowDown", Message: "Please reduce your request rate."}
}

// InternalError is S3's 500 InternalError.
func InternalError() *Fault {
	return &Fault{Status: http.StatusInternalServerError, Code: "InternalError",
		Message: "We encountered an internal error. Please try again."}
}

// NotImplemented is the answer of a server without multi-object delete
// (POST ?delete), as Google Cloud Storage's S3 interoperability API gives
// it: 501 NotImplemented.
func NotImplemented() *Fault {
	return &Fault{Status: http.StatusNotImplemented, Code: "NotImplemented",
		Message: "A header or query you provided implies functionality that is not implemented."}
}

// AccessDenied is S3's 403 AccessDenied.
func AccessDenied() *Fault {
	return &Fault{Status: http.StatusForbidden, Code: "AccessDenied", Message: "Access Denied"}
}

// Proxy is a reverse proxy in front of a Server that counts requests by S3
// operation and injects Faults. It keeps each request's Host header and
// path, so that requests signed for the proxy's URL stay valid at the
// server (Signature Version 4 signs the Host header, the path and the
// query, which a proxy passing them through leaves intact).
type Proxy struct {
	// URL is the proxy's base URL, the endpoint to give a client.
	URL string

	srv    *httptest.Server
	target *url.URL
	rp     *httputil.ReverseProxy

	mu     sync.Mutex
	hook   func(op string, r *http.Request) *Fault
	counts map[string]int
}

// NewProxy starts a proxy in front of s, closed at t's cleanup.
func NewProxy(t testing.TB, s *Server) *Proxy {
	t.Helper()
	target, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: target, counts: map[string]int{}}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme = target.Scheme
			r.Out.URL.Host = target.Host
			r.Out.Host = r.In.Host // signed; must reach the server unchanged
		},
		// A server that is down (killed on purpose) answers 502; the
		// log line for each would drown the test's output.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	t.Cleanup(p.srv.Close)
	return p
}

// SetHook sets the function asked, for every request, which Fault to
// apply (nil: none). It is called concurrently, with the request's S3
// operation name (see Operation). SetHook(nil) removes it.
func (p *Proxy) SetHook(hook func(op string, r *http.Request) *Fault) {
	p.mu.Lock()
	p.hook = hook
	p.mu.Unlock()
}

// Counts returns how many requests the proxy has received per S3
// operation since it started or since the last Reset, faulted ones
// included.
func (p *Proxy) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// Count returns the requests received for one operation.
func (p *Proxy) Count(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[op]
}

// Total returns the requests received for all operations.
func (p *Proxy) Total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, v := range p.counts {
		n += v
	}
	return n
}

// Reset sets every count to zero.
func (p *Proxy) Reset() {
	p.mu.Lock()
	p.counts = map[string]int{}
	p.mu.Unlock()
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	op := Operation(r)
	p.mu.Lock()
	p.counts[op]++
	hook := p.hook
	p.mu.Unlock()
	var f *Fault
	if hook != nil {
		f = hook(op, r)
	}
	if f == nil {
		p.rp.ServeHTTP(w, r)
		return
	}
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if f.Forward {
		rec := httptest.NewRecorder()
		p.rp.ServeHTTP(rec, r)
	}
	switch {
	case f.Drop:
		drop(w)
	case f.Redirect != "":
		w.Header().Set("Location", strings.TrimSuffix(f.Redirect, "/")+r.URL.RequestURI())
		w.WriteHeader(http.StatusTemporaryRedirect)
	case f.Body != nil:
		status := f.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.Header().Set("Content-Type", "application/xml")
		w.Header().Set("Content-Length", fmt.Sprint(len(f.Body)))
		w.WriteHeader(status)
		_, _ = w.Write(f.Body)
	case f.Status != 0:
		writeError(w, r, f)
	case f.Truncate:
		p.truncate(w, r)
	case f.Rewrite != nil:
		p.rewrite(w, r, f.Rewrite)
	default:
		if !f.Forward {
			p.rp.ServeHTTP(w, r)
		}
	}
}

// writeError writes an S3 error response in S3's XML error format.
func writeError(w http.ResponseWriter, r *http.Request, f *Fault) {
	body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>s3test</RequestId></Error>`,
		xmlEscape(f.Code), xmlEscape(f.Message), xmlEscape(r.URL.Path))
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-amz-request-id", "s3test")
	if f.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "0")
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(f.Status)
		return
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(f.Status)
	_, _ = io.WriteString(w, body)
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	for _, c := range s {
		switch c {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&apos;")
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// truncate forwards the request and sends the server's status, headers
// and half its body, then closes the connection.
func (p *Proxy) truncate(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	p.rp.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body[:len(body)/2])
	// The handler wrote less than Content-Length: net/http closes the
	// connection after it returns. Hijacking makes the close immediate.
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	drop(w)
}

// rewrite forwards the request and answers with the server's status and
// headers and, for a 200, the body rewritten.
func (p *Proxy) rewrite(w http.ResponseWriter, r *http.Request, f func([]byte) []byte) {
	rec := httptest.NewRecorder()
	p.rp.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	if rec.Code == http.StatusOK {
		body = f(body)
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body)
}

// drop closes the client's connection without (further) response.
func drop(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // net/http closes the connection
	}
	conn.Close()
}

// Operation names the S3 operation of a path-style request from its
// method, path and query, as S3's API reference names it: ListBuckets,
// CreateBucket, HeadBucket, DeleteBucket, ListObjectsV2, ListObjects,
// GetObject, HeadObject, PutObject, CopyObject, DeleteObject,
// DeleteObjects, CreateMultipartUpload, UploadPart,
// CompleteMultipartUpload, AbortMultipartUpload, or Other.
func Operation(r *http.Request) string {
	path := strings.TrimPrefix(r.URL.Path, "/")
	q := r.URL.Query()
	q.Del("x-id") // aws-sdk-go-v2 names some operations in the query
	bucketOnly := path != "" && !strings.Contains(strings.TrimSuffix(path, "/"), "/")
	switch {
	case path == "":
		if r.Method == http.MethodGet {
			return "ListBuckets"
		}
	case bucketOnly:
		switch r.Method {
		case http.MethodGet:
			switch {
			case q.Get("list-type") == "2":
				return "ListObjectsV2"
			case q.Has("location"):
				return "GetBucketLocation"
			case q.Has("versions"):
				return "ListObjectVersions"
			case q.Has("uploads"):
				return "ListMultipartUploads"
			case len(q) == 0 || q.Has("prefix") || q.Has("marker") || q.Has("delimiter") || q.Has("max-keys"):
				return "ListObjects"
			}
		case http.MethodHead:
			return "HeadBucket"
		case http.MethodPut:
			if len(q) == 0 {
				return "CreateBucket"
			}
		case http.MethodDelete:
			if len(q) == 0 {
				return "DeleteBucket"
			}
		case http.MethodPost:
			if q.Has("delete") {
				return "DeleteObjects"
			}
		}
	default:
		switch r.Method {
		case http.MethodGet:
			return "GetObject"
		case http.MethodHead:
			return "HeadObject"
		case http.MethodPut:
			switch {
			case q.Has("partNumber") && q.Has("uploadId"):
				return "UploadPart"
			case r.Header.Get("X-Amz-Copy-Source") != "":
				return "CopyObject"
			}
			return "PutObject"
		case http.MethodDelete:
			if q.Has("uploadId") {
				return "AbortMultipartUpload"
			}
			return "DeleteObject"
		case http.MethodPost:
			switch {
			case q.Has("uploads"):
				return "CreateMultipartUpload"
			case q.Has("uploadId"):
				return "CompleteMultipartUpload"
			}
		}
	}
	return "Other"
}
