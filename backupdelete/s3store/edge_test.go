package s3store

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	"github.com/caretaker-storage/caretaker/internal/s3test"
)

// This file tests the store against a real server the way hosts reach
// one: through a forward proxy, with virtual-hosted-style buckets, over
// TLS with a private CA.

// testDomain is the endpoint's host name in these tests: nothing resolves
// it, so every connection to it goes through a test's dialer or proxy.
const testDomain = "s3.test"

// resolveTest maps testDomain and its subdomains (virtual-hosted
// buckets) to 127.0.0.1, and refuses every other name.
func resolveTest(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if host != testDomain && !strings.HasSuffix(host, "."+testDomain) && host != "127.0.0.1" {
		return "", fmt.Errorf("test dialer: no such host %s", host)
	}
	return net.JoinHostPort("127.0.0.1", port), nil
}

// dialLog is a Config.DialContext that resolves testDomain to 127.0.0.1
// and records every address the store dials. With only set, it refuses
// every address but that one.
type dialLog struct {
	only  string
	mu    sync.Mutex
	addrs []string
}

func (d *dialLog) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	if d.only != "" && addr != d.only {
		return nil, fmt.Errorf("test dialer: %s is not the proxy %s", addr, d.only)
	}
	to, err := resolveTest(addr)
	if err != nil {
		return nil, err
	}
	return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, to)
}

func (d *dialLog) dialed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

// fwdProxy is an HTTP forward proxy as Squid or a corporate proxy is: a
// plain-HTTP request comes in absolute form (GET http://host/path) and
// is sent on; an https one is a CONNECT tunnel to host:port. It resolves
// testDomain itself, and records what passes.
type fwdProxy struct {
	URL  *url.URL // http://127.0.0.1:PORT
	tr   *http.Transport
	mu   sync.Mutex
	urls []string // absolute-form request URLs
	// hosts are the Host headers of the absolute-form requests.
	hosts    []string
	connects []string // CONNECT targets
	auth     []string // Proxy-Authorization headers, of every request
	// require, if set, is the Proxy-Authorization every request must
	// carry; others get 407.
	require string
}

func newFwdProxy(t *testing.T) *fwdProxy {
	p := &fwdProxy{}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, err := resolveTest(addr)
		if err != nil {
			return nil, err
		}
		return (&net.Dialer{}).DialContext(ctx, network, to)
	}
	p.tr = &http.Transport{DialContext: dial, DisableCompression: true}
	srv := httptest.NewServer(p)
	t.Cleanup(func() { srv.Close(); p.tr.CloseIdleConnections() })
	p.URL, _ = url.Parse(srv.URL)
	return p
}

func (p *fwdProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Proxy-Authorization")
	p.mu.Lock()
	p.auth = append(p.auth, auth)
	require := p.require
	p.mu.Unlock()
	if require != "" && auth != require {
		w.Header().Set("Proxy-Authenticate", `Basic realm="test"`)
		http.Error(w, "proxy authentication required", http.StatusProxyAuthRequired)
		return
	}
	if r.Method == http.MethodConnect {
		p.mu.Lock()
		p.connects = append(p.connects, r.Host)
		p.mu.Unlock()
		to, err := resolveTest(r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		up, err := net.Dial("tcp", to)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			up.Close()
			return
		}
		_, _ = conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		go func() { _, _ = io.Copy(up, brw); up.Close() }()
		_, _ = io.Copy(conn, up)
		conn.Close()
		return
	}
	if !r.URL.IsAbs() {
		http.Error(w, "a proxy takes absolute-form requests", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.urls = append(p.urls, r.URL.String())
	p.hosts = append(p.hosts, r.Host)
	p.mu.Unlock()
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header.Del("Proxy-Authorization")
	out.Header.Del("Proxy-Connection")
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (p *fwdProxy) seen() (urls, hosts, connects, auth []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.urls...), append([]string(nil), p.hosts...),
		append([]string(nil), p.connects...), append([]string(nil), p.auth...)
}

func (p *fwdProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.urls, p.hosts, p.connects, p.auth = nil, nil, nil, nil
}

// proxyURL is the proxy's URL with user information, as a host writes it
// in HTTP_PROXY.
func (p *fwdProxy) proxyURL(user, pass string) string {
	u := *p.URL
	if user != "" {
		u.User = url.UserPassword(user, pass)
	}
	return u.String()
}

// testCert is a self-signed certificate (its own CA) for 127.0.0.1,
// testDomain and *.testDomain, in PEM.
func testCert(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "caretaker test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              []string{testDomain, "*." + testDomain},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// secretEnv is a backup-target secret's data, read as OptionsFromEnv's
// getenv.
type secretEnv map[string]string

func (s secretEnv) get(k string) string { return s[k] }

// portOfURL is the port of a base URL.
func portOfURL(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	must(t, err)
	return u.Port()
}

// deleteBackup1 writes threeBackups with s, deletes backup-1, and checks
// on the server's disk that exactly block a went. It returns the number
// of requests of the deletion.
func deleteBackup1(t *testing.T, s *Store, srv *s3test.Server, bucket string, before func()) int64 {
	t.Helper()
	threeBackups(t, s)
	s.ResetStats()
	if before != nil {
		before()
	}
	must(t, s.DeleteBackup(ctxT(t), ref("backup-1")))
	n := s.Stats().Total()
	keys, err := srv.Keys(bucket, "lh/target/"+volumePath("vol-a")+"/blocks/")
	must(t, err)
	got := map[string]bool{}
	for _, k := range keys {
		if ck, ok := blockFromKey(k); ok {
			got[ck] = true
		}
	}
	if got[ckA] || !got[ckS] || !got[ckB] || !got[ckC] {
		t.Fatalf("blocks %v after deleting backup-1: want only a gone", got)
	}
	return n
}

// newStore is New(cfg) with the test clock and fast retries.
func newStore(t *testing.T, cfg Options) *Store {
	t.Helper()
	cfg.Clock, cfg.RetryInitial = fastClock{}, time.Millisecond
	s, err := New(cfg)
	must(t, err)
	return s
}

const (
	proxyUser     = "lh-proxy-user"
	proxyPassword = "proxy-pa55word!"
)

func basicAuth(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// TestForwardProxyPlainHTTP: with HTTP_PROXY and HTTPS_PROXY set as
// Longhorn's backup-target secret sets them, every request of a deletion
// to a plain-HTTP endpoint goes through the proxy, in absolute form, with
// the proxy's credentials, and the store opens no connection but to the
// proxy.
func TestForwardProxyPlainHTTP(t *testing.T) {
	srv := s3test.Shared(t)
	bucket := srv.NewBucket(t)
	p := newFwdProxy(t)
	p.require = basicAuth(proxyUser, proxyPassword)
	endpoint := "http://" + testDomain + ":" + portOfURL(t, srv.Endpoint)
	proxy := p.proxyURL(proxyUser, proxyPassword)
	cfg := OptionsFromEnv("s3://"+bucket+"@"+srv.Region+"/lh/target/", secretEnv{
		EnvAccessKeyID: srv.AccessKey, EnvSecretAccessKey: srv.SecretKey, EnvEndpoints: endpoint,
		EnvHTTPProxy: proxy, EnvHTTPSProxy: proxy, EnvNoProxy: "localhost,127.0.0.1,0.0.0.0,10.0.0.0/8,.svc,.cluster.local",
	}.get)
	d := &dialLog{only: p.URL.Host}
	cfg.DialContext = d.dial
	s := newStore(t, cfg)
	n := deleteBackup1(t, s, srv, bucket, p.reset)
	urls, hosts, connects, auth := p.seen()
	if int64(len(urls)) != n || n == 0 {
		t.Fatalf("the deletion sent %d requests, the proxy forwarded %d", n, len(urls))
	}
	for i, u := range urls {
		if !strings.HasPrefix(u, endpoint+"/"+bucket+"/") && !strings.HasPrefix(u, endpoint+"/"+bucket+"?") {
			t.Errorf("request %s: not path-style to %s", u, endpoint)
		}
		if hosts[i] != testDomain+":"+portOfURL(t, srv.Endpoint) {
			t.Errorf("request %s: Host %q", u, hosts[i])
		}
	}
	for _, a := range auth {
		if a != p.require {
			t.Fatalf("a request without the proxy's credentials: %q", a)
		}
	}
	if len(connects) != 0 {
		t.Errorf("CONNECT to a plain-HTTP endpoint: %v", connects)
	}
	for _, a := range d.dialed() {
		if a != p.URL.Host {
			t.Errorf("the store dialed %s, not the proxy", a)
		}
	}
	t.Logf("%d requests, all through the proxy: %s", n, s.Stats())
}

// TestNoProxyExcludesEndpoint: NO_PROXY naming the endpoint's host, or a
// domain it is in, sends every request straight to it.
func TestNoProxyExcludesEndpoint(t *testing.T) {
	srv := s3test.Shared(t)
	port := portOfURL(t, srv.Endpoint)
	for _, noProxy := range []string{testDomain, "localhost,." + strings.SplitN(testDomain, ".", 2)[1], testDomain + ":" + port, "*"} {
		t.Run(noProxy, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			p := newFwdProxy(t)
			proxy := p.proxyURL(proxyUser, proxyPassword)
			cfg := OptionsFromEnv("s3://"+bucket+"@"+srv.Region+"/lh/target/", secretEnv{
				EnvAccessKeyID: srv.AccessKey, EnvSecretAccessKey: srv.SecretKey, EnvEndpoints: "http://" + testDomain + ":" + port,
				EnvHTTPProxy: proxy, EnvHTTPSProxy: proxy, EnvNoProxy: noProxy,
			}.get)
			d := &dialLog{}
			cfg.DialContext = d.dial
			deleteBackup1(t, newStore(t, cfg), srv, bucket, nil)
			urls, _, connects, _ := p.seen()
			if len(urls)+len(connects) != 0 {
				t.Fatalf("NO_PROXY=%s, yet the proxy saw %v %v", noProxy, urls, connects)
			}
			for _, a := range d.dialed() {
				if a != testDomain+":"+port {
					t.Errorf("the store dialed %s", a)
				}
			}
		})
	}
}

// TestProxyCredentialsNeverShown: a proxy URL's password is in no error
// (an unreachable proxy, a proxy refusing the credentials, over plain
// HTTP and over CONNECT) and in no String of the Options or the Store.
func TestProxyCredentialsNeverShown(t *testing.T) {
	srv := s3test.Shared(t)
	bucket := srv.NewBucket(t)
	port := portOfURL(t, srv.Endpoint)
	p := newFwdProxy(t)
	p.require = basicAuth(proxyUser, "another-password")
	shown := func(t *testing.T, what, text string) {
		t.Helper()
		for _, sec := range []string{proxyPassword, url.QueryEscape(proxyPassword), url.PathEscape(proxyPassword),
			url.UserPassword(proxyUser, proxyPassword).String(), basicAuth(proxyUser, proxyPassword)[len("Basic "):]} {
			if strings.Contains(text, sec) {
				t.Errorf("%s shows the proxy password (%q): %s", what, sec, text)
			}
		}
	}
	for _, c := range []struct {
		name, endpoint, proxy string
	}{
		{"unreachable proxy", "http://" + testDomain + ":" + port, "http://" + proxyUser + ":" + url.QueryEscape(proxyPassword) + "@127.0.0.1:1"},
		{"unreachable proxy, https", "https://" + testDomain + ":" + port, "http://" + proxyUser + ":" + url.QueryEscape(proxyPassword) + "@127.0.0.1:1"},
		{"407 to a request", "http://" + testDomain + ":" + port, p.proxyURL(proxyUser, proxyPassword)},
		{"407 to CONNECT", "https://" + testDomain + ":" + port, p.proxyURL(proxyUser, proxyPassword)},
		{"bare host:port", "http://" + testDomain + ":" + port, proxyUser + ":" + url.QueryEscape(proxyPassword) + "@127.0.0.1:1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := OptionsFromEnv("s3://"+bucket+"@"+srv.Region+"/lh/target/", secretEnv{
				EnvAccessKeyID: srv.AccessKey, EnvSecretAccessKey: srv.SecretKey, EnvEndpoints: c.endpoint,
				EnvHTTPProxy: c.proxy, EnvHTTPSProxy: c.proxy,
			}.get)
			cfg.MaxAttempts = 1
			for _, verb := range []string{"%v", "%+v", "%s", "%#v"} {
				shown(t, "Options "+verb, fmt.Sprintf(verb, cfg))
			}
			s := newStore(t, cfg)
			for _, verb := range []string{"%v", "%+v", "%s", "%#v"} {
				shown(t, "Store "+verb, fmt.Sprintf(verb, s))
			}
			err := s.Check(ctxT(t))
			if err == nil {
				t.Fatal("Check passed through a proxy that refuses us")
			}
			shown(t, "Check's error", err.Error())
			shown(t, "Check's error %+v", fmt.Sprintf("%+v", err))
			err = s.DeleteBackup(ctxT(t), ref("backup-1"))
			if err == nil {
				t.Fatal("DeleteBackup passed through a proxy that refuses us")
			}
			shown(t, "DeleteBackup's error", err.Error())
			t.Logf("%v", err)
		})
	}
}

// startTLS starts a versitygw of the test's own that speaks TLS only,
// with a certificate of a private CA, and serves virtual-hosted-style
// buckets under testDomain.
func startTLS(t *testing.T) (srv *s3test.Server, certPEM []byte) {
	t.Helper()
	certPEM, keyPEM := testCert(t)
	srv, err := s3test.StartWith(ctxT(t), t, s3test.ServerOptions{CertPEM: certPEM, KeyPEM: keyPEM, VirtualDomain: testDomain + ":{port}"})
	must(t, err)
	if !strings.HasPrefix(srv.Endpoint, "https://") {
		t.Fatalf("endpoint %s", srv.Endpoint)
	}
	return srv, certPEM
}

// TestTLSEndToEnd: a real versitygw speaking TLS with a certificate of a
// private CA: trusted with AWS_CERT, refused without it or with another
// CA; over TLS, virtual-hosted-style buckets resolved through
// Config.DialContext, and an HTTPS_PROXY reached by CONNECT.
func TestTLSEndToEnd(t *testing.T) {
	srv, certPEM := startTLS(t)
	port := portOfURL(t, srv.Endpoint)
	otherCA, _ := testCert(t)
	base := func(bucket, endpoint string, cert []byte, more secretEnv) Options {
		env := secretEnv{EnvAccessKeyID: srv.AccessKey, EnvSecretAccessKey: srv.SecretKey, EnvEndpoints: endpoint, EnvCert: string(cert)}
		for k, v := range more {
			env[k] = v
		}
		return OptionsFromEnv("s3://"+bucket+"@"+srv.Region+"/lh/target/", env.get)
	}
	t.Run("untrusted", func(t *testing.T) {
		bucket := srv.NewBucket(t)
		for name, cert := range map[string][]byte{"no AWS_CERT": nil, "another CA": otherCA} {
			cfg := base(bucket, srv.Endpoint, cert, nil)
			cfg.MaxAttempts = 1
			err := newStore(t, cfg).Check(ctxT(t))
			if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "AWS_CERT") {
				t.Errorf("%s: %v, want ErrUnreachable naming AWS_CERT", name, err)
			}
		}
		cfg := base(bucket, "http://127.0.0.1:"+port, certPEM, nil)
		cfg.MaxAttempts = 1
		if err := newStore(t, cfg).Check(ctxT(t)); err == nil {
			t.Errorf("plain HTTP to a TLS-only server passed Check")
		}
	})
	t.Run("AWS_CERT", func(t *testing.T) {
		bucket := srv.NewBucket(t)
		d := &dialLog{}
		cfg := base(bucket, srv.Endpoint, certPEM, nil)
		cfg.DialContext = d.dial
		deleteBackup1(t, newStore(t, cfg), srv, bucket, nil)
		for _, a := range d.dialed() {
			if a != "127.0.0.1:"+port {
				t.Errorf("dialed %s", a)
			}
		}
	})
	t.Run("virtual-hosted", func(t *testing.T) {
		bucket := srv.NewBucket(t)
		d := &dialLog{}
		cfg := base(bucket, "https://"+testDomain+":"+port, certPEM, secretEnv{EnvVirtualHostedStyle: "true"})
		cfg.DialContext = d.dial
		deleteBackup1(t, newStore(t, cfg), srv, bucket, nil)
		dialed := d.dialed()
		if len(dialed) == 0 {
			t.Fatal("no connection")
		}
		for _, a := range dialed {
			if a != bucket+"."+testDomain+":"+port {
				t.Errorf("dialed %s, want the bucket's virtual host %s.%s:%s", a, bucket, testDomain, port)
			}
		}
	})
	for _, vhs := range []string{"false", "true"} {
		t.Run("CONNECT proxy, VIRTUAL_HOSTED_STYLE="+vhs, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			p := newFwdProxy(t)
			p.require = basicAuth(proxyUser, proxyPassword)
			proxy := p.proxyURL(proxyUser, proxyPassword)
			cfg := base(bucket, "https://"+testDomain+":"+port, certPEM, secretEnv{
				EnvVirtualHostedStyle: vhs, EnvHTTPProxy: proxy, EnvHTTPSProxy: proxy, EnvNoProxy: "localhost,127.0.0.1,.svc"})
			d := &dialLog{only: p.URL.Host}
			cfg.DialContext = d.dial
			deleteBackup1(t, newStore(t, cfg), srv, bucket, nil)
			urls, _, connects, auth := p.seen()
			want := testDomain + ":" + port
			if vhs == "true" {
				want = bucket + "." + want
			}
			if len(urls) != 0 || len(connects) == 0 {
				t.Fatalf("https through the proxy: %d absolute-form requests, %d CONNECTs", len(urls), len(connects))
			}
			for _, c := range connects {
				if c != want {
					t.Errorf("CONNECT %s, want %s", c, want)
				}
			}
			for _, a := range auth {
				if a != p.require {
					t.Errorf("a CONNECT without the proxy's credentials: %q", a)
				}
			}
			for _, a := range d.dialed() {
				if a != p.URL.Host {
					t.Errorf("the store dialed %s, not the proxy", a)
				}
			}
		})
	}
}

// TestVirtualHostedStyleRequests: with VIRTUAL_HOSTED_STYLE=true every
// request of a deletion names the bucket in the host (the URL's and the
// Host header) and not in the path, and a real versitygw serving
// virtual-hosted buckets accepts them; with "false", the reverse. A
// forward proxy shows each request's absolute URL.
func TestVirtualHostedStyleRequests(t *testing.T) {
	srv, err := s3test.StartWith(ctxT(t), t, s3test.ServerOptions{VirtualDomain: testDomain + ":{port}"})
	must(t, err)
	port := portOfURL(t, srv.Endpoint)
	for _, vhs := range []string{"true", "false"} {
		t.Run(vhs, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			p := newFwdProxy(t)
			cfg := OptionsFromEnv("s3://"+bucket+"@"+srv.Region+"/lh/target/", secretEnv{
				EnvAccessKeyID: srv.AccessKey, EnvSecretAccessKey: srv.SecretKey, EnvEndpoints: "http://" + testDomain + ":" + port,
				EnvVirtualHostedStyle: vhs, EnvHTTPProxy: p.proxyURL("", ""),
			}.get)
			cfg.DialContext = (&dialLog{only: p.URL.Host}).dial
			s := newStore(t, cfg)
			n := deleteBackup1(t, s, srv, bucket, p.reset)
			urls, hosts, _, _ := p.seen()
			if int64(len(urls)) != n {
				t.Fatalf("%d requests, %d through the proxy", n, len(urls))
			}
			host := bucket + "." + testDomain + ":" + port
			path := "/lh/target/"
			if vhs == "false" {
				host, path = testDomain+":"+port, "/"+bucket+"/lh/target/"
			}
			for i, raw := range urls {
				u, err := url.Parse(raw)
				must(t, err)
				if u.Host != host || hosts[i] != host {
					t.Errorf("%s: host %s, Host header %s; want %s", raw, u.Host, hosts[i], host)
				}
				// A listing's path is the bucket's root (the prefix is in
				// the query); an object's is its key.
				root := strings.TrimSuffix(strings.TrimSuffix(path, "lh/target/"), "/")
				if u.Path != root && u.Path != root+"/" && !strings.HasPrefix(u.Path, path) {
					t.Errorf("%s: path %q, want %s... or the bucket root", raw, u.Path, path)
				}
				if vhs == "true" && strings.Contains(u.Path, bucket) {
					t.Errorf("%s: the bucket in the path", raw)
				}
			}
			t.Logf("first request: %s (Host %s)", urls[0], hosts[0])
		})
	}
}

// TestEndlessListing: a server whose listing never ends, each page
// truncated with a new continuation token, is cut off after
// MaxListPages pages with ErrTooLarge (and backupdelete.ErrCorrupt), long
// before the context's deadline. When it is the first listing (the
// locks), nothing is deleted; when it is the listing of every block
// object (FullCollection), its pages full of block keys, no block is
// deleted (the backup's cfg went first, as in Longhorn, and the
// Collector recovery finishes later).
func TestEndlessListing(t *testing.T) {
	for _, c := range []struct {
		name string
		full bool
		dir  string // the listing that never ends
	}{{"locks", false, "/locks/"}, {"blocks", true, "/blocks/"}} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, true, Options{MaxListPages: 50, FullCollection: c.full})
			threeBackups(t, e.store)
			var pages atomic.Int64
			e.proxy.SetHook(func(op string, r *http.Request) *s3test.Fault {
				prefix := r.URL.Query().Get("prefix")
				if op != "ListObjectsV2" || !strings.HasSuffix(prefix, c.dir) {
					return nil
				}
				n := pages.Add(1)
				var keys strings.Builder
				if c.full {
					for i := range 10 {
						ck := checksum(fmt.Sprint("endless ", n, " ", i))
						fmt.Fprintf(&keys, "<Contents><Key>%s%s/%s/%s.blk</Key><Size>1</Size></Contents>", prefix, ck[0:2], ck[2:4], ck)
					}
				}
				return &s3test.Fault{Body: []byte(fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+
					`<ListBucketResult><Name>%s</Name><Prefix>%s</Prefix>%s<MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>`+
					`<NextContinuationToken>token-%d</NextContinuationToken></ListBucketResult>`, e.bucket, prefix, keys.String(), n))}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			err := e.store.DeleteBackup(ctx, ref("backup-1"))
			took := time.Since(start)
			e.proxy.SetHook(nil)
			if !errors.Is(err, ErrTooLarge) || !errors.Is(err, backupdelete.ErrCorrupt) || ctx.Err() != nil {
				t.Fatalf("%v after %v (ctx %v), want ErrTooLarge before the deadline", err, took, ctx.Err())
			}
			if n := pages.Load(); n != 50 {
				t.Errorf("%d pages requested, want MaxListPages=50", n)
			}
			if c.full {
				if got := e.blocks(t, "vol-a"); len(got) != 4 {
					t.Fatalf("blocks deleted: %v left", got)
				}
			} else {
				wantUntouched(t, e)
			}
			t.Logf("%v after %d pages in %v", err, pages.Load(), took)
		})
	}
}

// lhWriter writes objects as Longhorn's S3 driver does
// (longhorn/backupstore s3/s3.go Write and s3/s3_service.go PutObject):
// the key is filepath.Join of the target URL's path with its leading
// slashes trimmed (initFunc) and the file's path (updatePath); the body
// goes through the SDK's upload manager with no Content-Type and no
// metadata, as one PutObject up to its 5 MiB part size and as a
// multipart upload above it.
type lhWriter struct {
	t      *testing.T
	client *s3.Client
	bucket string
	path   string // the URL's path, leading slashes trimmed
	keys   map[string]bool
}

func newLHWriter(t *testing.T, srv *s3test.Server, bucket, targetURL string) *lhWriter {
	u, err := url.Parse(targetURL)
	must(t, err)
	return &lhWriter{t: t, client: srv.Client(t), bucket: bucket, path: strings.TrimLeft(u.Path, "/"), keys: map[string]bool{}}
}

const lhPartSize = 5 << 20 // the upload manager's default PartSize

func (w *lhWriter) write(rel string, data []byte) {
	t := w.t
	t.Helper()
	key := filepath.Join(w.path, rel)
	w.keys[key] = true
	ctx := ctxT(t)
	if len(data) <= lhPartSize {
		_, err := w.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(w.bucket), Key: aws.String(key), Body: bytes.NewReader(data)})
		must(t, err)
		return
	}
	up, err := w.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(w.bucket), Key: aws.String(key)})
	must(t, err)
	var parts []s3types.CompletedPart
	for i, off := int32(1), 0; off < len(data); i, off = i+1, off+lhPartSize {
		end := min(off+lhPartSize, len(data))
		p, err := w.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(w.bucket), Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(i), Body: bytes.NewReader(data[off:end])})
		must(t, err)
		parts = append(parts, s3types.CompletedPart{ETag: p.ETag, PartNumber: aws.Int32(i)})
	}
	_, err = w.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(w.bucket), Key: aws.String(key),
		UploadId: up.UploadId, MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts}})
	must(t, err)
}

// TestLonghornWrittenFixture: a volume written as Longhorn's S3 driver
// writes it, under a target URL with an empty path, a path with and
// without a trailing slash, and a path with extra leading slashes, is
// read by the store under exactly Longhorn's keys; deleting a backup
// removes exactly its cfg and its one unique block, rewrites volume.cfg
// in place, and leaves no other key behind. One remaining backup's cfg is
// over 5 MiB, so that Longhorn wrote it as a multipart upload.
func TestLonghornWrittenFixture(t *testing.T) {
	srv := s3test.Shared(t)
	many := make([]BlockMapping, 0, 60000)
	for i := range cap(many) {
		many = append(many, BlockMapping{Offset: int64(i) << 21, BlockChecksum: checksum(fmt.Sprint("many ", i))})
	}
	for _, c := range []struct{ path, prefix string }{
		{"/", ""}, {"/longhorn/", "longhorn"}, {"/longhorn", "longhorn"}, {"//a/b/", "a/b"},
	} {
		t.Run(c.path, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			target := "s3://" + bucket + "@" + srv.Region + c.path
			w := newLHWriter(t, srv, bucket, target)
			vol := volumePath("vol-a")
			// Under the empty path, backup-2 is over 5 MiB: Longhorn's
			// upload manager wrote it in parts.
			b2Blocks := []BlockMapping{{Offset: 0, BlockChecksum: ckB}, {Offset: 2 << 20, BlockChecksum: ckS}}
			if c.prefix == "" {
				b2Blocks = append([]BlockMapping{{Offset: 0, BlockChecksum: ckB}}, many[1:]...)
			}
			enc := func(data []byte, err error) []byte { must(t, err); return data }
			w.write(vol+"/volume.cfg", enc(lhformat.EncodeVolume(lhformat.Volume{Name: "vol-a", Size: 128 << 30, CreatedTime: "2026-11-01T00:00:00Z",
				LastBackupName: "backup-3", LastBackupAt: "2026-11-03T00:00:00Z", BlockCount: 4, CompressionMethod: "lz4", DataEngine: "v1"})))
			for _, b := range []struct {
				name   string
				blocks []BlockMapping
			}{
				{"backup-1", []BlockMapping{{Offset: 0, BlockChecksum: ckA}, {Offset: 2 << 20, BlockChecksum: ckS}}},
				{"backup-2", b2Blocks},
				{"backup-3", []BlockMapping{{Offset: 0, BlockChecksum: ckC}, {Offset: 2 << 20, BlockChecksum: ckS}}},
			} {
				at := "2026-11-0" + b.name[len(b.name)-1:] + "T00:00:00Z"
				w.write(vol+"/"+lhformat.BackupCfgPath(b.name), enc(lhformat.EncodeBackup(lhformat.Backup{Name: b.name, VolumeName: "vol-a",
					SnapshotName: "snap-" + b.name, SnapshotCreatedAt: at, CreatedTime: at, Size: 128 << 30, CompressionMethod: "lz4", Blocks: b.blocks})))
			}
			for _, ck := range []string{ckA, ckS, ckB, ckC} {
				w.write(vol+"/"+lhformat.BlockPath(ck), []byte("lz4 block "+ck))
			}
			if c.prefix == "" {
				head, err := w.client.HeadObject(ctxT(t), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(vol + "/" + lhformat.BackupCfgPath("backup-2"))})
				must(t, err)
				if !strings.Contains(aws.ToString(head.ETag), "-") {
					t.Fatalf("backup-2's ETag %s is not a multipart upload's", aws.ToString(head.ETag))
				}
			}
			s := newStore(t, Options{URL: target, Endpoint: srv.Endpoint, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey})
			if got := s.Target().Prefix; got != c.prefix {
				t.Fatalf("prefix %q, want Longhorn's %q", got, c.prefix)
			}
			ctx := ctxT(t)
			must(t, s.Check(ctx))
			if vols, err := s.Volumes(ctx); err != nil || len(vols) != 1 || vols[0] != "vol-a" {
				t.Fatalf("volumes %v %v", vols, err)
			}
			if names, err := s.Backups(ctx, "vol-a"); err != nil || len(names) != 3 {
				t.Fatalf("backups %v %v", names, err)
			}
			b2, err := s.ReadBackup(ctx, ref("backup-2"))
			must(t, err)
			if len(b2.Blocks) != len(b2Blocks) {
				t.Fatalf("backup-2 read with %d blocks, want %d", len(b2.Blocks), len(b2Blocks))
			}
			before, err := srv.Keys(bucket, "")
			must(t, err)
			if len(before) != len(w.keys) {
				t.Fatalf("the server holds %d keys, Longhorn wrote %d", len(before), len(w.keys))
			}
			for _, k := range before {
				if !w.keys[k] {
					t.Fatalf("key %q is not one Longhorn wrote", k)
				}
			}
			must(t, s.DeleteBackup(ctx, ref("backup-1")))
			after, err := srv.Keys(bucket, "")
			must(t, err)
			gone := map[string]bool{}
			for k := range w.keys {
				gone[k] = true
			}
			for _, k := range after {
				if !gone[k] {
					t.Errorf("key %q left behind, not one Longhorn wrote", k)
				}
				delete(gone, k)
			}
			want := map[string]bool{filepath.Join(w.path, vol, lhformat.BackupCfgPath("backup-1")): true, filepath.Join(w.path, vol, lhformat.BlockPath(ckA)): true}
			if len(gone) != len(want) {
				t.Fatalf("removed %v, want %v", gone, want)
			}
			for k := range gone {
				if !want[k] {
					t.Fatalf("removed %q, want only %v", k, want)
				}
			}
			v, err := s.ReadVolume(ctx, "vol-a")
			must(t, err)
			// Longhorn's BlockCount: the blocks the remaining backups
			// reference.
			refd := map[string]bool{ckC: true, ckS: true}
			for _, m := range b2Blocks {
				refd[m.BlockChecksum] = true
			}
			if v.BlockCount != int64(len(refd)) || v.LastBackupName != "backup-3" {
				t.Fatalf("volume.cfg %+v", v)
			}
		})
	}
}

// TestNoSecretInLogsHooksOrErrors: a deletion driven by the Driver, with
// a session token and a proxy with a password, logging everything (debug
// level) and observing every event, once succeeding and once failing at
// the proxy and at the server: neither the secret key, nor the session
// token, nor the proxy password appears in a log record, an event, an
// error, the Stats or the Store's and the Config's String.
func TestNoSecretInLogsHooksOrErrors(t *testing.T) {
	srv := s3test.Shared(t)
	bucket := srv.NewBucket(t)
	port := portOfURL(t, srv.Endpoint)
	const token = "IQoJb3JpZ2luX2VjEXAMPLEsessiontoken0123456789"
	p := newFwdProxy(t)
	p.require = basicAuth(proxyUser, proxyPassword)
	proxy := p.proxyURL(proxyUser, proxyPassword)
	secrets := []string{srv.SecretKey, token, proxyPassword, url.QueryEscape(proxyPassword), basicAuth(proxyUser, proxyPassword)[len("Basic "):]}

	var out strings.Builder // everything printed: logs, events, errors
	var mu sync.Mutex
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(&out, format+"\n", args...)
	}
	logger := slog.New(slog.NewJSONHandler(writerFunc(func(b []byte) (int, error) { logf("%s", b); return len(b), nil }),
		&slog.HandlerOptions{Level: slog.LevelDebug, AddSource: true}))
	hooks := backupdelete.HooksFunc(func(e backupdelete.Event) { logf("event %+v %#v %v", e, e, e.Err) })

	run := func(env secretEnv, name string, wantErr bool) {
		t.Helper()
		cfg := OptionsFromEnv("s3://"+bucket+"@"+srv.Region+"/lh/target/", env.get)
		cfg.DialContext = (&dialLog{only: p.URL.Host}).dial
		cfg.MaxAttempts = 2
		s := newStore(t, cfg)
		logf("config %v %+v %#v store %v %+v %#v", cfg, cfg, cfg, s, s, s)
		done := make(chan error, 4)
		drv, err := backupdelete.NewDriver(s, backupdelete.DriverOptions{Logger: logger, Hooks: hooks,
			OnDone: func(_ backupdelete.BackupRef, err error) { done <- err }})
		if err != nil {
			t.Fatal(err)
		}
		defer drv.Close()
		req := backupdelete.Request{Ref: backupdelete.BackupRef{Target: "default", Volume: "vol-a", Name: name}, State: backupdelete.StateCompleted}
		for i := 0; i < 4; i++ {
			res, err := drv.Reconcile(ctxT(t), req)
			logf("reconcile %+v %v", res, err)
			if err != nil {
				if !wantErr {
					t.Fatal(err)
				}
				break
			}
			if res.Finalize {
				break
			}
			req.State, req.Message = res.State, res.Message
			if res.StartCommand || res.State == backupdelete.StateDeleting {
				select {
				case err := <-done:
					logf("command: %v %+v", err, err)
					if (err != nil) != wantErr {
						t.Fatalf("deleting %s: %v", name, err)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("the delete command did not return")
				}
			}
			if wantErr && req.State == backupdelete.StateError {
				break
			}
		}
		logf("stats %v %+v", s.Stats(), s.Stats())
	}
	env := secretEnv{EnvAccessKeyID: srv.AccessKey, EnvSecretAccessKey: srv.SecretKey, EnvSessionToken: token,
		EnvEndpoints: "http://" + testDomain + ":" + port, EnvHTTPProxy: proxy, EnvHTTPSProxy: proxy, EnvNoProxy: "localhost"}
	{
		// The fixture, written without the token.
		cfg := OptionsFromEnv("s3://"+bucket+"@"+srv.Region+"/lh/target/", env.get)
		cfg.SessionToken, cfg.HTTPProxy, cfg.Endpoint = "", "", srv.Endpoint
		threeBackups(t, newStore(t, cfg))
	}
	// versitygw refuses a session token for its root user
	// (InvalidToken): the successful deletion goes without one, and the
	// token is in the failing runs.
	noToken := secretEnv{}
	for k, v := range env {
		noToken[k] = v
	}
	delete(noToken, EnvSessionToken)
	run(noToken, "backup-1", false)
	keys, err := srv.Keys(bucket, "lh/target/"+volumePath("vol-a")+"/backups/")
	must(t, err)
	if len(keys) != 2 {
		t.Fatalf("backup-1 not deleted: %v", keys)
	}
	// Failures: the proxy refuses the password; the server refuses the
	// session token; the server refuses the secret key.
	p.mu.Lock()
	p.require = basicAuth(proxyUser, "the proxy wants another")
	p.mu.Unlock()
	bare := secretEnv{}
	for k, v := range env {
		bare[k] = v
	}
	// A proxy written as user:password@host:port, without a scheme, as
	// ProxyFromEnvironment also reads it.
	bare[EnvHTTPProxy] = strings.TrimPrefix(proxy, "http://")
	run(bare, "backup-2", true)
	p.mu.Lock()
	p.require = basicAuth(proxyUser, proxyPassword)
	p.mu.Unlock()
	run(env, "backup-2", true) // the proxy passes; the server: InvalidToken
	wrong := secretEnv{}
	for k, v := range env {
		wrong[k] = v
	}
	delete(wrong, EnvSessionToken)
	wrong[EnvSecretAccessKey] = "wrong-" + srv.SecretKey
	secrets = append(secrets, wrong[EnvSecretAccessKey])
	run(wrong, "backup-3", true)

	text := out.String()
	for _, want := range []string{"deletion finished", "delete command failed", "event", "InvalidToken", "Proxy Authentication Required", "SignatureDoesNotMatch"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the capture lacks %q: the test did not see what it checks\n%s", want, text)
		}
	}
	for _, sec := range secrets {
		if strings.Contains(text, sec) {
			t.Errorf("a secret (%.6s...) appears in the logs, events or errors", sec)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Log(text)
	}
}

// writerFunc adapts a function to io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
