package s3test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Version is the versitygw release the tests run against; install-versitygw.sh
// installs it.
const Version = "v1.8.0"

// healthPath is versitygw's health endpoint (its --health option): GET on it
// answers 200 once the gateway serves requests.
const healthPath = "/health"

// ErrNoBinary says versitygw is not installed where this package looks for it.
var ErrNoBinary = errors.New("s3test: versitygw " + Version + " not found ($VERSITYGW, PATH, " +
	"~/.cache/caretaker/versitygw-" + Version + "/versitygw); `make test` installs it " +
	"(internal/s3test/install-versitygw.sh prints its path; export VERSITYGW=<that path>)")

// Binary returns the path of the versitygw binary: $VERSITYGW if set (an
// error if it is not executable, since someone asked for it), else
// "versitygw" on PATH, else the cache directory install-versitygw.sh
// installs into. It returns ErrNoBinary when none is there.
func Binary() (string, error) {
	if p := os.Getenv("VERSITYGW"); p != "" {
		if !executable(p) {
			return "", fmt.Errorf("s3test: $VERSITYGW=%q is not an executable file", p)
		}
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	if dir, err := os.UserCacheDir(); err == nil {
		p := filepath.Join(dir, "caretaker", "versitygw-"+Version, "versitygw")
		if executable(p) {
			return p, nil
		}
	}
	return "", ErrNoBinary
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// Server is one running versitygw on 127.0.0.1 with the posix backend.
// Its fields are read-only.
type Server struct {
	// Endpoint is the server's base URL, http://127.0.0.1:PORT.
	Endpoint string
	// Region is the region the server signs for (us-east-1).
	Region string
	// AccessKey and SecretKey are the root user's credentials.
	AccessKey, SecretKey string
	// Dir is the posix backend's root: bucket b is the directory Dir/b and
	// its object k the file Dir/b/k.
	Dir string

	bin     string
	addr    string // 127.0.0.1:PORT
	removeD bool   // remove Dir at Stop
	opts    ServerOptions
	roots   *x509.CertPool // trusts opts.CertPEM; nil without TLS

	mu      sync.Mutex
	proc    *os.Process
	exited  chan struct{} // closed when proc has been waited for
	output  *tailBuffer
	stopped bool
}

// Start starts a server of its own for t, stopped and removed at t's
// cleanup. It skips t when the binary is missing (see ErrNoBinary) and
// returns an error when the server does not become ready before ctx ends
// or within a minute.
func Start(ctx context.Context, t testing.TB) (*Server, error) {
	t.Helper()
	bin, err := Binary()
	if errors.Is(err, ErrNoBinary) {
		t.Skip(err.Error())
	}
	if err != nil {
		return nil, err
	}
	s, err := start(ctx, bin, t.TempDir(), false)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("s3test: stopping versitygw: %v", err)
		}
	})
	return s, nil
}

// ServerOptions configure a server of one's own (StartWith). The zero
// value is Start's server: plain HTTP, path-style buckets only.
type ServerOptions struct {
	// CertPEM and KeyPEM, both set, make the server speak TLS only
	// (versitygw's --cert and --key). Endpoint is then
	// https://127.0.0.1:PORT, and the harness's own clients (Client,
	// NewBucket, the readiness probe) trust CertPEM, which must therefore
	// name 127.0.0.1 among its addresses.
	CertPEM, KeyPEM []byte
	// VirtualDomain, if set, also serves virtual-hosted-style requests
	// (versitygw's --virtual-domain): a request whose Host is
	// BUCKET.VirtualDomain addresses BUCKET. Path-style requests to
	// 127.0.0.1 keep working. versitygw compares the whole Host header,
	// port included, so the domain is usually "name:PORT"; with PORT
	// unknown before the start, write "{port}" and it is replaced by the
	// server's port.
	VirtualDomain string
}

// StartWith is Start with options: a server of its own for t, stopped
// and removed at t's cleanup.
func StartWith(ctx context.Context, t testing.TB, o ServerOptions) (*Server, error) {
	t.Helper()
	bin, err := Binary()
	if errors.Is(err, ErrNoBinary) {
		t.Skip(err.Error())
	}
	if err != nil {
		return nil, err
	}
	if (len(o.CertPEM) == 0) != (len(o.KeyPEM) == 0) {
		return nil, errors.New("s3test: CertPEM and KeyPEM go together")
	}
	s, err := startWith(ctx, bin, t.TempDir(), false, o)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("s3test: stopping versitygw: %v", err)
		}
	})
	return s, nil
}

// VirtualDomain is the base domain of virtual-hosted-style requests the
// server answers ("" when it answers none), with "{port}" replaced.
func (s *Server) VirtualDomain() string {
	return strings.ReplaceAll(s.opts.VirtualDomain, "{port}", s.addr[strings.LastIndex(s.addr, ":")+1:])
}

// Roots trusts the server's certificate; nil when it speaks plain HTTP.
func (s *Server) Roots() *x509.CertPool { return s.roots }

// httpClient is an HTTP client that trusts the server's certificate.
func (s *Server) httpClient(timeout time.Duration) *http.Client {
	hc := &http.Client{Timeout: timeout}
	if s.roots != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: s.roots, MinVersion: tls.VersionTLS12}
		hc.Transport = tr
	}
	return hc
}

var shared struct {
	mu  sync.Mutex
	srv *Server
	err error
}

// Shared returns the test binary's one shared server, starting it on first
// use. It skips t when the binary is missing and fails t when the server
// does not start. The server lives until the test binary exits; a package
// using it calls Main from its TestMain so that the server is stopped and
// its directory removed then:
//
//	func TestMain(m *testing.M) { s3test.Main(m) }
//
// Tests sharing it keep to buckets of their own (NewBucket).
func Shared(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if errors.Is(err, ErrNoBinary) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil && shared.err == nil {
		dir, err := os.MkdirTemp("", tempPrefix())
		if err != nil {
			shared.err = err
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			shared.srv, shared.err = start(ctx, bin, dir, true)
			cancel()
			if shared.err != nil {
				os.RemoveAll(dir)
			}
		}
	}
	if shared.err != nil {
		t.Fatalf("s3test: starting the shared versitygw: %v", shared.err)
	}
	return shared.srv
}

// Main runs the package's tests and then stops the shared server, if one
// was started, and removes its directory. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	shared.mu.Lock()
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "s3test: stopping the shared versitygw: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// tempPrefix names the shared server's directory after the test process,
// so that a later run can remove the directory of a process that ended
// without Main (removeStale).
func tempPrefix() string {
	removeStale()
	return fmt.Sprintf("caretaker-s3test-%d-", os.Getpid())
}

func start(ctx context.Context, bin, dir string, removeDir bool) (*Server, error) {
	return startWith(ctx, bin, dir, removeDir, ServerOptions{})
}

func startWith(ctx context.Context, bin, dir string, removeDir bool, o ServerOptions) (*Server, error) {
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	s := &Server{
		Region:    "us-east-1",
		AccessKey: "caretakertest",
		SecretKey: hex.EncodeToString(secret),
		Dir:       dir,
		bin:       bin,
		removeD:   removeDir,
		opts:      o,
	}
	scheme := "http://"
	if len(o.CertPEM) > 0 {
		s.roots = x509.NewCertPool()
		if !s.roots.AppendCertsFromPEM(o.CertPEM) {
			return nil, errors.New("s3test: CertPEM holds no certificate")
		}
		scheme = "https://"
		for name, data := range map[string][]byte{"cert.pem": o.CertPEM, "key.pem": o.KeyPEM} {
			if err := os.WriteFile(filepath.Join(filepath.Dir(dir), filepath.Base(dir)+"-"+name), data, 0o600); err != nil {
				return nil, err
			}
		}
	}
	// A free port can be taken between our probe and the server's bind;
	// try a few.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var port int
		if port, err = freePort(); err != nil {
			return nil, err
		}
		s.addr = fmt.Sprintf("127.0.0.1:%d", port)
		s.Endpoint = scheme + s.addr
		if err = s.launch(ctx); err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launch starts the process on s.addr and waits until it is ready; on
// failure the process is gone.
func (s *Server) launch(ctx context.Context) error {
	out := &tailBuffer{max: 16 << 10}
	args := []string{
		"--port", s.addr,
		"--access", s.AccessKey,
		"--secret", s.SecretKey,
		"--region", s.Region,
		"--health", healthPath,
		"--quiet"}
	if s.roots != nil {
		args = append(args, "--cert", s.Dir+"-cert.pem", "--key", s.Dir+"-key.pem")
	}
	if d := s.VirtualDomain(); d != "" {
		args = append(args, "--virtual-domain", d)
	}
	cmd := exec.Command(s.bin, append(args, "posix", s.Dir)...)
	// Only what the process needs: versitygw reads many settings from
	// VGW_* and ROOT_* variables, which must not leak in from the caller.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	cmd.Stdout, cmd.Stderr = out, out
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("s3test: starting %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.proc, s.exited, s.output, s.stopped = cmd.Process, exited, out, false
	s.mu.Unlock()
	if err := s.waitReady(ctx, exited); err != nil {
		s.kill()
		return fmt.Errorf("%w; versitygw said: %s", err, out.String())
	}
	return nil
}

// waitReady polls the health endpoint, then a signed ListBuckets, until
// both succeed, the process exits, ctx ends or a minute passes.
func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	hc := s.httpClient(2 * time.Second)
	client := s.newClient(hc)
	healthy := false
	var last error
	for {
		select {
		case <-exited:
			return fmt.Errorf("s3test: versitygw exited before it was ready")
		default:
		}
		if !healthy {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+healthPath, nil)
			if resp, err := hc.Do(req); err != nil {
				last = err
			} else {
				resp.Body.Close()
				healthy = resp.StatusCode == http.StatusOK
				last = fmt.Errorf("health endpoint answered %s", resp.Status)
			}
		}
		if healthy {
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := client.ListBuckets(rctx, &s3.ListBucketsInput{})
			rcancel()
			if err == nil {
				return nil
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("s3test: versitygw on %s not ready: %v (last: %v)", s.addr, ctx.Err(), last)
		case <-exited:
			return fmt.Errorf("s3test: versitygw exited before it was ready")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// kill ends the process with SIGKILL and waits for it.
func (s *Server) kill() {
	s.mu.Lock()
	proc, exited := s.proc, s.exited
	s.stopped = true
	s.mu.Unlock()
	if proc == nil {
		return
	}
	_ = proc.Kill()
	<-exited
}

// Stop ends the server by its process id (a termination signal, then a
// kill after five seconds), waits for it, and removes Dir if the server
// owns it. Calling it again does nothing.
func (s *Server) Stop() error {
	s.mu.Lock()
	proc, exited, already := s.proc, s.exited, s.stopped
	s.stopped = true
	s.mu.Unlock()
	if proc != nil && !already {
		if err := terminate(proc); err != nil {
			_ = proc.Kill()
		}
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = proc.Kill()
			<-exited
		}
	}
	if s.removeD {
		return os.RemoveAll(s.Dir)
	}
	return nil
}

// Restart kills the server as a crash would (SIGKILL, mid-request if one
// is running) and starts it again on the same port and directory, waiting
// until it is ready. Objects written before the kill are still there.
func (s *Server) Restart(ctx context.Context) error {
	s.kill()
	// The port was just ours; another process taking it in between is a
	// failure of the test machine, reported as such.
	return s.launch(ctx)
}

// Kill ends the server as a crash would and leaves it down (until
// Restart), for tests of an unreachable endpoint.
func (s *Server) Kill() { s.kill() }

// Output is the tail of the server's stdout and stderr, for failure
// messages.
func (s *Server) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.output == nil {
		return ""
	}
	return s.output.String()
}

// Client returns an S3 client for the server: path-style, the root
// credentials, the server's region, and no retries (a test sees every
// answer as the server gave it).
func (s *Server) Client(t testing.TB) *s3.Client {
	t.Helper()
	return s.ClientFor(s.Endpoint)
}

// ClientFor returns a client like Client's that sends its requests to
// endpoint (a Proxy's URL) while signing with the server's credentials.
func (s *Server) ClientFor(endpoint string) *s3.Client {
	c := s.newClient(nil)
	return s3.New(c.Options(), func(o *s3.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

func (s *Server) newClient(hc *http.Client) *s3.Client {
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		Retryer:      aws.NopRetryer{},
	}, func(o *s3.Options) {
		if hc != nil {
			o.HTTPClient = hc
		} else if s.roots != nil {
			o.HTTPClient = s.httpClient(0)
		}
	})
}

var bucketSeq struct {
	sync.Mutex
	n int
}

// NewBucket creates a bucket with a name no other test uses and removes
// it, with everything in it, at t's cleanup (straight from Dir, so that
// cleanup works while the server is down).
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	bucketSeq.Lock()
	bucketSeq.n++
	n := bucketSeq.n
	bucketSeq.Unlock()
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("ct-%d-%s", n, hex.EncodeToString(suffix))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client(t).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("s3test: creating bucket %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(filepath.Join(s.Dir, name)); err != nil {
			t.Errorf("s3test: removing bucket %s: %v", name, err)
		}
	})
	return name
}

// ObjectPath is the file that holds object key of bucket in the posix
// backend, for tests that check what is stored without asking the server.
func (s *Server) ObjectPath(bucket, key string) string {
	return filepath.Join(s.Dir, bucket, filepath.FromSlash(key))
}

// Keys lists every object of bucket under prefix by walking the posix
// directory, sorted, without asking the server. Directories versitygw
// keeps for its own use (names starting with ".sgwtmp") are left out.
func (s *Server) Keys(bucket, prefix string) ([]string, error) {
	root := filepath.Join(s.Dir, bucket)
	var keys []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".sgwtmp") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
		return nil
	})
	sort.Strings(keys)
	return keys, err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = append(b.b, p...)
	if len(b.b) > b.max {
		b.b = append([]byte(nil), b.b[len(b.b)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(string(b.b))
}
