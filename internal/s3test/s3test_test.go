package s3test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

func TestMain(m *testing.M) { Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func put(t *testing.T, c *s3.Client, bucket, key, body string) {
	t.Helper()
	_, err := c.PutObject(ctxT(t), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: strings.NewReader(body)})
	if err != nil {
		t.Fatalf("PutObject %s: %v", key, err)
	}
}

func get(ctx context.Context, c *s3.Client, bucket, key string) (string, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return string(b), err
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// A signed request works and lands as a file in the posix directory.
func TestSignedRequestsAndPosixLayout(t *testing.T) {
	s := Shared(t)
	c := s.Client(t)
	bucket := s.NewBucket(t)
	put(t, c, bucket, "backupstore/volumes/a/b/v/volume.cfg", `{"Name":"v"}`)
	got, err := get(ctxT(t), c, bucket, "backupstore/volumes/a/b/v/volume.cfg")
	if err != nil || got != `{"Name":"v"}` {
		t.Fatalf("GetObject = %q, %v", got, err)
	}
	b, err := os.ReadFile(s.ObjectPath(bucket, "backupstore/volumes/a/b/v/volume.cfg"))
	if err != nil || string(b) != `{"Name":"v"}` {
		t.Fatalf("posix file = %q, %v", b, err)
	}
	keys, err := s.Keys(bucket, "backupstore/")
	if err != nil || len(keys) != 1 || keys[0] != "backupstore/volumes/a/b/v/volume.cfg" {
		t.Fatalf("Keys = %q, %v", keys, err)
	}

	// A wrong secret is refused: the server really checks signatures.
	bad := &Server{Endpoint: s.Endpoint, Region: s.Region, AccessKey: s.AccessKey, SecretKey: "wrong"}
	_, err = bad.Client(t).ListBuckets(ctxT(t), &s3.ListBucketsInput{})
	if code := errorCode(err); code != "SignatureDoesNotMatch" && code != "InvalidAccessKeyId" {
		t.Fatalf("ListBuckets with a wrong secret: err = %v (code %q), want a signature error", err, code)
	}
}

// Requests signed for the proxy's URL are accepted by the server behind it,
// and the proxy counts them by operation.
func TestProxyKeepsSignaturesAndCounts(t *testing.T) {
	s := Shared(t)
	p := NewProxy(t, s)
	c := s.ClientFor(p.URL)
	bucket := s.NewBucket(t)
	for _, k := range []string{"a/1", "a/2", "b/3"} {
		put(t, c, bucket, k, "x"+k)
	}
	if got, err := get(ctxT(t), c, bucket, "a/2"); err != nil || got != "xa/2" {
		t.Fatalf("GetObject through the proxy = %q, %v", got, err)
	}
	if _, err := c.HeadObject(ctxT(t), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("a/1")}); err != nil {
		t.Fatal(err)
	}
	lo, err := c.ListObjectsV2(ctxT(t), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("a/")})
	if err != nil || len(lo.Contents) != 2 {
		t.Fatalf("ListObjectsV2 = %v, %v", lo, err)
	}
	if _, err := c.DeleteObject(ctxT(t), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("b/3")}); err != nil {
		t.Fatal(err)
	}
	dout, err := c.DeleteObjects(ctxT(t), &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{
		Objects: []types.ObjectIdentifier{{Key: aws.String("a/1")}, {Key: aws.String("a/2")}}}})
	if err != nil || len(dout.Deleted) != 2 {
		t.Fatalf("DeleteObjects = %v, %v", dout, err)
	}
	want := map[string]int{"PutObject": 3, "GetObject": 1, "HeadObject": 1, "ListObjectsV2": 1,
		"DeleteObject": 1, "DeleteObjects": 1}
	got := p.Counts()
	for op, n := range want {
		if got[op] != n {
			t.Errorf("Count(%s) = %d, want %d (all: %v)", op, got[op], n, got)
		}
	}
	if p.Total() != 8 {
		t.Errorf("Total = %d, want 8 (%v)", p.Total(), got)
	}
	if keys, _ := s.Keys(bucket, ""); len(keys) != 0 {
		t.Errorf("objects left after the deletes: %q", keys)
	}
	p.Reset()
	if p.Total() != 0 {
		t.Errorf("Total after Reset = %d", p.Total())
	}
}

// Every fault kind gives the client what a hostile or failing server would.
func TestProxyFaults(t *testing.T) {
	s := Shared(t)
	p := NewProxy(t, s)
	c := s.ClientFor(p.URL)
	bucket := s.NewBucket(t)
	put(t, c, bucket, "obj", strings.Repeat("0123456789", 100))

	for _, tc := range []struct {
		fault *Fault
		op    string
		code  string
	}{
		{SlowDown(), "GetObject", "SlowDown"},
		{InternalError(), "GetObject", "InternalError"},
		{AccessDenied(), "GetObject", "AccessDenied"},
		{NotImplemented(), "DeleteObjects", "NotImplemented"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			p.SetHook(func(op string, _ *http.Request) *Fault {
				if op == tc.op {
					return tc.fault
				}
				return nil
			})
			defer p.SetHook(nil)
			var err error
			if tc.op == "DeleteObjects" {
				_, err = c.DeleteObjects(ctxT(t), &s3.DeleteObjectsInput{Bucket: aws.String(bucket),
					Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("obj")}}}})
			} else {
				_, err = get(ctxT(t), c, bucket, "obj")
			}
			if errorCode(err) != tc.code {
				t.Fatalf("err = %v, want code %s", err, tc.code)
			}
			var re interface{ HTTPStatusCode() int }
			if !errors.As(err, &re) || re.HTTPStatusCode() != tc.fault.Status {
				t.Fatalf("err = %v, want HTTP status %d", err, tc.fault.Status)
			}
		})
	}
	if _, err := os.Stat(s.ObjectPath(bucket, "obj")); err != nil {
		t.Fatalf("a refused DeleteObjects deleted the object: %v", err)
	}

	t.Run("Delay", func(t *testing.T) {
		p.SetHook(func(op string, _ *http.Request) *Fault { return &Fault{Delay: 2 * time.Second} })
		defer p.SetHook(nil)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
		if err == nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the context's deadline", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a delayed request held the client %v past its 200ms context", d)
		}
	})

	t.Run("Truncate", func(t *testing.T) {
		p.SetHook(func(op string, _ *http.Request) *Fault { return &Fault{Truncate: true} })
		defer p.SetHook(nil)
		got, err := get(ctxT(t), c, bucket, "obj")
		if err == nil {
			t.Fatalf("a truncated body read without error: %d bytes", len(got))
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "EOF") {
			t.Fatalf("err = %v, want an unexpected EOF", err)
		}
	})

	t.Run("Drop", func(t *testing.T) {
		p.SetHook(func(op string, _ *http.Request) *Fault { return &Fault{Drop: true} })
		defer p.SetHook(nil)
		if _, err := get(ctxT(t), c, bucket, "obj"); err == nil || errorCode(err) != "" {
			t.Fatalf("err = %v, want a transport error", err)
		}
	})

	t.Run("Redirect", func(t *testing.T) {
		var hits atomic.Int32
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits.Add(1)
			w.WriteHeader(http.StatusForbidden)
		}))
		defer other.Close()
		p.SetHook(func(op string, _ *http.Request) *Fault { return &Fault{Redirect: other.URL} })
		defer p.SetHook(nil)
		req, _ := http.NewRequest(http.MethodGet, p.URL+"/"+bucket+"/obj?x=1", nil)
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTemporaryRedirect ||
			resp.Header.Get("Location") != other.URL+"/"+bucket+"/obj?x=1" {
			t.Fatalf("got %s Location %q", resp.Status, resp.Header.Get("Location"))
		}
	})

	t.Run("Body", func(t *testing.T) {
		p.SetHook(func(op string, _ *http.Request) *Fault {
			return &Fault{Body: []byte("<ListBucketResult><Contents><Key>unclosed")}
		})
		defer p.SetHook(nil)
		if _, err := c.ListObjectsV2(ctxT(t), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)}); err == nil {
			t.Fatal("a malformed listing parsed without error")
		}
	})

	t.Run("Forward", func(t *testing.T) {
		put(t, c, bucket, "gone", "x")
		p.SetHook(func(op string, _ *http.Request) *Fault {
			if op == "DeleteObject" {
				f := InternalError()
				f.Forward = true
				return f
			}
			return nil
		})
		defer p.SetHook(nil)
		_, err := c.DeleteObject(ctxT(t), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("gone")})
		if errorCode(err) != "InternalError" {
			t.Fatalf("err = %v, want InternalError", err)
		}
		if _, err := os.Stat(s.ObjectPath(bucket, "gone")); !os.IsNotExist(err) {
			t.Fatalf("a forwarded DeleteObject did not reach the server: stat err = %v", err)
		}
	})
}

// A restart keeps the objects and the port, and a server of one's own is
// independent of the shared one.
func TestRestartKeepsObjects(t *testing.T) {
	s, err := Start(ctxT(t), t)
	if err != nil {
		t.Fatal(err)
	}
	c := s.Client(t)
	bucket := s.NewBucket(t)
	put(t, c, bucket, "k", "before")
	endpoint := s.Endpoint
	s.Kill()
	if _, err := c.ListBuckets(ctxT(t), &s3.ListBucketsInput{}); err == nil {
		t.Fatal("ListBuckets succeeded on a killed server")
	}
	if err := s.Restart(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if s.Endpoint != endpoint {
		t.Fatalf("endpoint changed across the restart: %s -> %s", endpoint, s.Endpoint)
	}
	if got, err := get(ctxT(t), c, bucket, "k"); err != nil || got != "before" {
		t.Fatalf("after the restart GetObject = %q, %v", got, err)
	}
	dir := s.Dir
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListBuckets(ctxT(t), &s3.ListBucketsInput{}); err == nil {
		t.Fatal("ListBuckets succeeded on a stopped server")
	}
	// Start's directory is the test's, removed by the testing package.
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("Stop removed a directory it does not own: %v", err)
	}
}

func TestOperation(t *testing.T) {
	for _, tc := range []struct{ method, target, op string }{
		{"GET", "/", "ListBuckets"},
		{"PUT", "/b", "CreateBucket"},
		{"HEAD", "/b", "HeadBucket"},
		{"DELETE", "/b", "DeleteBucket"},
		{"GET", "/b?list-type=2&prefix=x%2F", "ListObjectsV2"},
		{"GET", "/b/?list-type=2", "ListObjectsV2"},
		{"GET", "/b?prefix=x", "ListObjects"},
		{"GET", "/b?location", "GetBucketLocation"},
		{"POST", "/b?delete", "DeleteObjects"},
		{"POST", "/b?delete=&x-id=DeleteObjects", "DeleteObjects"},
		{"GET", "/b/k/x?x-id=GetObject", "GetObject"},
		{"HEAD", "/b/k", "HeadObject"},
		{"PUT", "/b/k?x-id=PutObject", "PutObject"},
		{"PUT", "/b/k?partNumber=1&uploadId=u", "UploadPart"},
		{"DELETE", "/b/k", "DeleteObject"},
		{"DELETE", "/b/k?uploadId=u", "AbortMultipartUpload"},
		{"POST", "/b/k?uploads", "CreateMultipartUpload"},
		{"POST", "/b/k?uploadId=u", "CompleteMultipartUpload"},
		{"PATCH", "/b/k", "Other"},
	} {
		r := httptest.NewRequest(tc.method, tc.target, bytes.NewReader(nil))
		if got := Operation(r); got != tc.op {
			t.Errorf("Operation(%s %s) = %s, want %s", tc.method, tc.target, got, tc.op)
		}
	}
	r := httptest.NewRequest("PUT", "/b/k", nil)
	r.Header.Set("X-Amz-Copy-Source", "/b/j")
	if got := Operation(r); got != "CopyObject" {
		t.Errorf("Operation(copy) = %s", got)
	}
}

func TestBinaryFromEnvironment(t *testing.T) {
	t.Setenv("VERSITYGW", "/nonexistent/versitygw")
	if _, err := Binary(); err == nil || errors.Is(err, ErrNoBinary) {
		t.Fatalf("Binary with a wrong $VERSITYGW = %v, want an error naming it", err)
	}
	t.Setenv("VERSITYGW", "")
	t.Setenv("PATH", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	if _, err := Binary(); !errors.Is(err, ErrNoBinary) {
		t.Fatalf("Binary with nothing installed = %v, want ErrNoBinary", err)
	}
	if !strings.Contains(ErrNoBinary.Error(), "make test") {
		t.Fatalf("the skip message does not say how to install: %v", ErrNoBinary)
	}
}

// TestStartWithChecksOptions: a certificate without its key, or a
// CertPEM that holds no certificate, is refused before any process
// starts.
func TestStartWithChecksOptions(t *testing.T) {
	if _, err := Binary(); err != nil {
		t.Skip(err)
	}
	if _, err := StartWith(ctxT(t), t, ServerOptions{CertPEM: []byte("x")}); err == nil {
		t.Fatal("a certificate without a key was accepted")
	}
	if _, err := StartWith(ctxT(t), t, ServerOptions{CertPEM: []byte("not PEM"), KeyPEM: []byte("not PEM")}); err == nil {
		t.Fatal("a CertPEM with no certificate was accepted")
	}
	s := &Server{addr: "127.0.0.1:7070", opts: ServerOptions{VirtualDomain: "s3.test:{port}"}}
	if d := s.VirtualDomain(); d != "s3.test:7070" {
		t.Fatalf("VirtualDomain %q", d)
	}
}

// DropListed and EndListing rewrite listings the way a lying gateway
// would, and the SDK parses what they give.
func TestProxyRewritesListings(t *testing.T) {
	s := Shared(t)
	p := NewProxy(t, s)
	c := s.ClientFor(p.URL)
	bucket := s.NewBucket(t)
	for _, k := range []string{"d/1", "d/2", "d/3"} {
		put(t, c, bucket, k, "x")
	}
	list := func(maxKeys int32) (keys []string, truncated bool) {
		t.Helper()
		out, err := c.ListObjectsV2(ctxT(t), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("d/"), MaxKeys: aws.Int32(maxKeys)})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		return keys, aws.ToBool(out.IsTruncated)
	}
	p.SetHook(func(op string, _ *http.Request) *Fault {
		if op == "ListObjectsV2" {
			return DropListed("d/2")
		}
		return nil
	})
	if keys, _ := list(1000); strings.Join(keys, " ") != "d/1 d/3" {
		t.Errorf("DropListed: %q, want d/1 d/3", keys)
	}
	p.SetHook(func(op string, _ *http.Request) *Fault {
		if op == "ListObjectsV2" {
			return EndListing()
		}
		return nil
	})
	if keys, truncated := list(2); strings.Join(keys, " ") != "d/1 d/2" || truncated {
		t.Errorf("EndListing: %q truncated %v, want d/1 d/2 complete", keys, truncated)
	}
	p.SetHook(nil)
	if keys, truncated := list(2); len(keys) != 2 || !truncated {
		t.Errorf("honest: %q truncated %v, want 2 keys truncated", keys, truncated)
	}
	if _, err := get(ctxT(t), c, bucket, "d/2"); err != nil {
		t.Errorf("the dropped object must still be there: %v", err)
	}
}
