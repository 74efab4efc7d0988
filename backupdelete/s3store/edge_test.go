package s3store

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

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

// secretEnv is a backup-target secret's data, read as ConfigFromEnv's
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
func newStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	cfg.Options.Clock, cfg.Options.RetryInitial = fastClock{}, time.Millisecond
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
	cfg := ConfigFromEnv("s3://"+bucket+"@"+srv.Region+"/lh/target/", secretEnv{
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
			cfg := ConfigFromEnv("s3://"+bucket+"@"+srv.Region+"/lh/target/", secretEnv{
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
// HTTP and over CONNECT) and in no String of the Config or the Store.
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
			cfg := ConfigFromEnv("s3://"+bucket+"@"+srv.Region+"/lh/target/", secretEnv{
				EnvAccessKeyID: srv.AccessKey, EnvSecretAccessKey: srv.SecretKey, EnvEndpoints: c.endpoint,
				EnvHTTPProxy: c.proxy, EnvHTTPSProxy: c.proxy,
			}.get)
			cfg.Options.MaxAttempts = 1
			for _, verb := range []string{"%v", "%+v", "%s", "%#v"} {
				shown(t, "Config "+verb, fmt.Sprintf(verb, cfg))
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
