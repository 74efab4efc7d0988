package s3store

import (
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
)

// TestCustomCA: an endpoint with a certificate from a private CA is
// trusted with Config.CACert (Longhorn's AWS_CERT) and refused without
// it, as ErrUnreachable.
func TestCustomCA(t *testing.T) {
	e := newEnv(t, false, Options{MaxAttempts: 1})
	threeBackups(t, e.store)
	target, err := url.Parse(e.srv.Endpoint)
	must(t, err)
	// A TLS front for the server that passes the signed Host header on.
	front := httptest.NewTLSServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host
	}})
	defer front.Close()
	cfg := e.cfg
	cfg.Endpoint = front.URL
	s, err := New(cfg)
	must(t, err)
	if err := s.Check(ctxT(t)); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("%v, want ErrUnreachable for an untrusted certificate", err)
	}
	cfg.CACert = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw})
	s, err = New(cfg)
	must(t, err)
	must(t, s.Check(ctxT(t)))
	names, err := s.Backups(ctxT(t), "vol-a")
	if err != nil || len(names) != 3 {
		t.Fatalf("%v %v", names, err)
	}
}
