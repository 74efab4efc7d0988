package mgmtapi

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/caretaker-storage/caretaker/tokenring"
)

// DefaultPort is where the Management API listens in cass-operator's
// pods (pkg/httphelper/client.go, callNodeMgmtEndpoint, dials
// <protocol>://<pod IP>:8080).
const DefaultPort = 8080

// CleanerFor returns a function that gives the Cleaner of one node, at
// scheme://endpoint:port (0 means DefaultPort), for drivers that clean
// many nodes: it has the signature of tokenring's CleanerFor. It builds
// one Cleaner per endpoint and gives the same one again, so that the jobs
// an attempt started are known to the next attempt's StopCleanups. Every
// Cleaner shares opts and one HTTP client (opts.HTTPClient, or one made
// from opts.TLSConfig), so connections are pooled. An empty
// endpoint, or a scheme other than http and https, is an error wrapping
// tokenring.ErrInvalidURL.
func CleanerFor(scheme string, port int, opts Options) func(endpoint string) (tokenring.Cleaner, error) {
	if port == 0 {
		port = DefaultPort
	}
	if opts.HTTPClient == nil {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.TLSClientConfig = opts.TLSConfig
		opts.HTTPClient = &http.Client{Transport: transport}
	}
	var mu sync.Mutex
	built := map[string]*Cleaner{}
	return func(endpoint string) (tokenring.Cleaner, error) {
		if endpoint == "" {
			return nil, errors.Join(tokenring.ErrInvalidURL, errors.New("mgmtapi: empty endpoint"))
		}
		mu.Lock()
		defer mu.Unlock()
		if c := built[endpoint]; c != nil {
			return c, nil
		}
		c, err := New(scheme+"://"+net.JoinHostPort(endpoint, strconv.Itoa(port)), opts)
		if err != nil {
			return nil, err
		}
		built[endpoint] = c
		return c, nil
	}
}
