// Package kubetest is test support for the Kubernetes examples' tests
// (this module's, examples/controller-runtime's and
// examples/scylla-operator's), not part of caretaker's API: it starts a
// real etcd and a real kube-apiserver on 127.0.0.1 with a static bearer
// token, installs the CRDs the tests need, waits for conditions, runs a
// host as a child process of the test binary, and prints a host's log
// when its test fails.
//
// The binaries come from the environment: KUBE_APISERVER and ETCD, by
// default the cache that hack/build-apiserver.sh and hack/build-etcd.sh
// fill. `make kube-test` builds both from the Go module proxy. The etcd is
// the release kube-apiserver v1.34.2 is built against (3.6): an etcd older
// than 3.5 lacks watch progress requests, and kube-apiserver then serves
// every consistent list from etcd instead of its watch cache, which no
// real cluster of Kubernetes 1.34 does.
//
// kube-apiserver runs with API priority and fairness on, as in a real
// cluster: a burst of requests is queued and may be answered 429.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// APIServerVersion is the kube-apiserver release hack/build-apiserver.sh builds.
const APIServerVersion = "v1.34.2"

// EtcdVersion is the etcd release hack/build-etcd.sh builds: the one
// kube-apiserver v1.34.2's go.mod pins for its etcd client.
const EtcdVersion = "v3.6.4"

// ReadyTimeout bounds the wait for etcd and kube-apiserver to become ready.
const ReadyTimeout = 90 * time.Second

// ErrNoBinaries says the binaries are missing; the message says how to
// get them.
var ErrNoBinaries = errors.New("kubetest: kube-apiserver or etcd missing; run `make kube-test` from the repository root, or set KUBE_APISERVER and ETCD")

// Binaries returns the paths of kube-apiserver and etcd, or an error
// wrapping ErrNoBinaries.
func Binaries() (apiserver, etcd string, err error) {
	cache := os.Getenv("KUBE_APISERVER_CACHE")
	if cache == "" {
		if cache = os.Getenv("XDG_CACHE_HOME"); cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(cache, "caretaker")
	}
	if apiserver = os.Getenv("KUBE_APISERVER"); apiserver == "" {
		apiserver = filepath.Join(cache, "kube-apiserver-"+APIServerVersion)
	}
	if _, err := os.Stat(apiserver); err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrNoBinaries, err)
	}
	if etcd = os.Getenv("ETCD"); etcd == "" {
		etcd = filepath.Join(cache, "etcd-"+EtcdVersion)
	}
	if _, err := os.Stat(etcd); err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrNoBinaries, err)
	}
	return apiserver, etcd, nil
}

// Cluster is a running etcd and kube-apiserver.
type Cluster struct {
	// Dir holds the data, certificates, kubeconfig and logs.
	Dir string
	// Config reaches the API server as a member of system:masters.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for Config.
	Kubeconfig string
	// AgentUser is a user with no permissions but those RBAC grants it,
	// and AgentKubeconfig a kubeconfig file for it: tests bind a Role to
	// AgentUser to run a program with exactly that Role's rules.
	AgentUser       string
	AgentKubeconfig string
	// EtcdURL is etcd's client URL (plain HTTP on 127.0.0.1).
	EtcdURL string

	procs []*exec.Cmd
	logs  []string
}

// Start starts etcd and kube-apiserver in a new directory under base and
// waits until both are ready. On error everything started is stopped.
func Start(base string) (c *Cluster, err error) {
	apiserverBin, etcdBin, err := Binaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, "kube-")
	if err != nil {
		return nil, err
	}
	c = &Cluster{Dir: dir}
	defer func() {
		if err != nil {
			c.Stop()
			err = fmt.Errorf("%w\n%s", err, c.LogTail(60))
		}
	}()

	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	if err := c.start("etcd", etcdBin,
		"--name=kubetest",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=kubetest="+peerURL,
		"--log-level=warn",
	); err != nil {
		return nil, err
	}
	if err := waitHTTP(clientURL+"/health", nil, ""); err != nil {
		return nil, fmt.Errorf("kubetest: etcd not ready: %w", err)
	}
	c.EtcdURL = clientURL

	token, err := randomToken()
	if err != nil {
		return nil, err
	}
	agentToken, err := randomToken()
	if err != nil {
		return nil, err
	}
	c.AgentUser = "kubetest-agent"
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+`,kubetest-admin,kubetest-admin,"system:masters"`+"\n"+
		agentToken+","+c.AgentUser+","+c.AgentUser+"\n"), 0o600); err != nil {
		return nil, err
	}
	saKey := filepath.Join(dir, "sa.key")
	if err := writeRSAKey(saKey); err != nil {
		return nil, err
	}
	host := "https://127.0.0.1:" + strconv.Itoa(ports[2])
	if err := c.start("kube-apiserver", apiserverBin,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports[2]),
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--etcd-servers="+clientURL,
		"--token-auth-file="+tokens,
		"--anonymous-auth=false",
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+saKey,
		"--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--v=1",
	); err != nil {
		return nil, err
	}
	if err := waitHTTP(host+"/readyz", insecureClient(), token); err != nil {
		return nil, fmt.Errorf("kubetest: kube-apiserver not ready: %w", err)
	}

	c.Config = &rest.Config{
		Host:            host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             200,
		Burst:           400,
		// Longhorn's finalizer "longhorn.io" draws a warning on every
		// write; say it once.
		WarningHandler: rest.NewWarningWriter(os.Stderr, rest.WarningWriterOptions{Deduplicate: true}),
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, []byte(kubeconfig(host, "kubetest-admin", token)), 0o600); err != nil {
		return nil, err
	}
	c.AgentKubeconfig = filepath.Join(dir, "kubeconfig-agent")
	if err := os.WriteFile(c.AgentKubeconfig, []byte(kubeconfig(host, c.AgentUser, agentToken)), 0o600); err != nil {
		return nil, err
	}
	return c, nil
}

// Dynamic returns a dynamic client for the cluster.
func (c *Cluster) Dynamic() (dynamic.Interface, error) { return dynamic.NewForConfig(c.Config) }

// Stop stops kube-apiserver, then etcd, and waits for them to exit. The
// directory is left for RemoveAll, so that logs survive a failure.
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		if p.Process == nil {
			continue
		}
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	c.procs = nil
}

// PID returns the process id of the named component ("etcd" or
// "kube-apiserver"), or 0 if it is not running.
func (c *Cluster) PID(name string) int {
	for i, p := range c.procs {
		if filepath.Base(c.logs[i]) == name+".log" && p.Process != nil {
			return p.Process.Pid
		}
	}
	return 0
}

// RemoveAll removes the cluster's directory; call it after Stop.
func (c *Cluster) RemoveAll() error { return os.RemoveAll(c.Dir) }

// LogTail returns the last n lines of each component's log.
func (c *Cluster) LogTail(n int) string {
	var b strings.Builder
	for _, path := range c.logs {
		data, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "==== %s (last %d lines)\n%s\n", path, len(lines), strings.Join(lines, "\n"))
	}
	return b.String()
}

func (c *Cluster) start(name, bin string, args ...string) error {
	logPath := filepath.Join(c.Dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kubetest: starting %s: %w", name, err)
	}
	c.procs = append(c.procs, cmd)
	c.logs = append(c.logs, logPath)
	return nil
}

// waitHTTP polls url until it answers 200 or ReadyTimeout passes.
func waitHTTP(url string, client *http.Client, token string) error {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	deadline := time.Now().Add(ReadyTimeout)
	var last string
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(body))
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond) // polling readiness: nothing to wait on
	}
	return fmt.Errorf("%s not ready after %s: %s", url, ReadyTimeout, last)
}

func insecureClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a self-signed loopback test server
	}}
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return os.WriteFile(path, pemBytes, 0o600)
}

func kubeconfig(host, user, token string) string {
	return "apiVersion: v1\nkind: Config\n" +
		"clusters:\n- name: kubetest\n  cluster:\n    server: " + host + "\n    insecure-skip-tls-verify: true\n" +
		"users:\n- name: " + user + "\n  user:\n    token: " + token + "\n" +
		"contexts:\n- name: kubetest\n  context:\n    cluster: kubetest\n    user: " + user + "\n" +
		"current-context: kubetest\n"
}
