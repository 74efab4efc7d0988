package agent_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
)

// scaleReportEnv turns TestScaleReport on (make scale): it takes minutes.
const scaleReportEnv = "CARETAKER_SCALE_REPORT"

// countingProxy forwards one agent process's requests to the API server
// and counts them, so that the report has each process's own requests.
type countingProxy struct {
	rc   *reqCounter
	n429 *atomic.Int64 // answers 429 Too Many Requests (priority and fairness shedding load)
	srv  *http.Server
	url  string
}

func startCountingProxy(t *testing.T, target, token string) *countingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rc := newReqCounter()
	rp := httputil.NewSingleHostReverseProxy(u)
	direct := rp.Director
	rp.Director = func(r *http.Request) {
		direct(r)
		r.Host = u.Host
		r.Header.Set("Authorization", "Bearer "+token) // the agent user's: the agent speaks plain HTTP to the proxy
	}
	rp.FlushInterval = -1 // watches stream
	n429 := new(atomic.Int64)
	rp.Transport = statusCounter{countingTransport{&http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, // the test cluster's self-signed certificate
		MaxIdleConnsPerHost: 16,
	}, rc}, http.StatusTooManyRequests, n429}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{rc: rc, n429: n429, srv: &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}, url: "http://" + ln.Addr().String()}
	go func() { _ = p.srv.Serve(ln) }()
	t.Cleanup(func() { _ = p.srv.Close() })
	return p
}

// procStatus reads VmRSS and VmHWM (peak) of a process, in KiB.
func procStatus(pid int) (rss, hwm int64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1, -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			rss = n
		case "VmHWM:":
			hwm = n
		}
	}
	return rss, hwm
}

// reportAgent is an agent process of the report, behind its own proxy.
type reportAgent struct {
	cmd   *exec.Cmd
	proxy *countingProxy
	done  chan struct{}
}

func (e *scaleEnv) startReportAgent(node, token string) *reportAgent {
	e.t.Helper()
	return e.startProxiedAgent(node, token, "error", os.Stderr)
}

// startProxiedAgent starts an agent process for node behind a counting
// proxy of its own, logging at level to out.
func (e *scaleEnv) startProxiedAgent(node, token, level string, out io.Writer) *reportAgent {
	e.t.Helper()
	c := kubetest.Require(e.t)
	p := startCountingProxy(e.t, c.Config.Host, token)
	kc := filepath.Join(e.base, "kubeconfig-"+node)
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: " + p.url +
		"\nusers:\n- name: agent\n  user: {}" +
		"\ncontexts:\n- name: proxy\n  context:\n    cluster: proxy\n    user: agent\ncurrent-context: proxy\n"
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	args := []string{"-kubeconfig=" + kc, "-namespace=" + e.ns, "-node=" + node, "-period=" + scalePeriod.String(), "-log-level=" + level}
	args = append(args, extraAgentArgs...)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), agentArgsEnv+"="+strings.Join(args, "\n"))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	a := &reportAgent{cmd: cmd, proxy: p, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(a.done) }()
	e.t.Cleanup(a.stop)
	return a
}

func (a *reportAgent) stop() {
	select {
	case <-a.done:
		return
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}

// TestScaleReport is make scale: it grows one cluster to 10, 50 and 100
// nodes (replicas per node from CARETAKER_SCALE_REPLICAS, default 20, each
// of its own Volume, and one orphaned directory per node) and at each size
// starts three agents as processes of their own, each behind a proxy that
// counts its requests, and reports their RSS, their requests to start and
// converge, their requests per minute in steady state, and the bytes they
// received. The other nodes have objects but no agent: an agent's cost
// depends on the cluster's objects, not on the other agents, whose writes
// are to their own nodes' Orphans.
func TestScaleReport(t *testing.T) {
	if os.Getenv(scaleReportEnv) == "" {
		t.Skip("set " + scaleReportEnv + "=1 (make scale) to run the scale report; it takes minutes")
	}
	c := kubetest.Require(t)
	replicas := 20
	if v, err := strconv.Atoi(os.Getenv("CARETAKER_SCALE_REPLICAS")); err == nil && v > 0 {
		replicas = v
	}
	window := 30 * time.Second
	e := &scaleEnv{env: newEnv(t), disks: map[string]disk{}}
	ac, err := clientcmd.BuildConfigFromFlags("", c.AgentKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	const sample = 3
	type row struct {
		n                        int
		rss, hwm                 float64 // MiB, mean of the sample
		startReq, startList      float64
		perMin, startKiB, minKiB float64
	}
	var rows []row
	have := 0
	for _, n := range []int{10, 50, 100} {
		start := time.Now()
		e.addNodesR(have, n, replicas)
		t.Logf("N=%d: %d nodes × %d replicas created in %s", n, n, replicas, time.Since(start).Round(time.Second))
		startSample := func() []*reportAgent {
			var agents []*reportAgent
			for i := range sample {
				agents = append(agents, e.startReportAgent(scaleNode(i), ac.BearerToken))
			}
			// Converged: each agent's requests stop growing for 5 s.
			e.waitFor("the sample agents to converge", func() error {
				before := make([]int, len(agents))
				for i, a := range agents {
					before[i] = a.proxy.rc.total()
				}
				time.Sleep(5 * time.Second)
				for i, a := range agents {
					if got := a.proxy.rc.total(); got != before[i] || got < 8 {
						return fmt.Errorf("agent %d: %d requests, was %d", i, got, before[i])
					}
				}
				return nil
			})
			return agents
		}
		if have == 0 {
			// A first run creates the sample nodes' Orphans, so that every
			// measured start below is a restart with its Orphans in place.
			for _, a := range startSample() {
				a.stop()
			}
		}
		have = n
		agents := startSample()
		r := row{n: n}
		startBytes := make([]int64, len(agents))
		startTotal := make([]int, len(agents))
		for i, a := range agents {
			startTotal[i] = a.proxy.rc.total()
			startBytes[i] = a.proxy.rc.bytes.Load()
			r.startReq += float64(startTotal[i]) / sample
			r.startList += float64(a.proxy.rc.snapshot()["list"]) / sample
			r.startKiB += float64(startBytes[i]) / 1024 / sample
		}
		time.Sleep(window)
		for i, a := range agents {
			rss, hwm := procStatus(a.cmd.Process.Pid)
			r.rss += float64(rss) / 1024 / sample
			r.hwm += float64(hwm) / 1024 / sample
			r.perMin += float64(a.proxy.rc.total()-startTotal[i]) / window.Minutes() / sample
			r.minKiB += float64(a.proxy.rc.bytes.Load()-startBytes[i]) / 1024 / window.Minutes() / sample
		}
		for _, a := range agents {
			a.stop()
		}
		rows = append(rows, r)
		t.Logf("N=%d measured: %+v", n, r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "per agent (mean of %d agent processes), %d replicas per node, steady window %s:\n", sample, replicas, window)
	fmt.Fprintf(&b, "%6s %10s %10s %10s %10s %12s %12s %12s\n", "nodes", "RSS MiB", "peak MiB", "start req", "start LIST", "start KiB", "req/min", "KiB/min")
	for _, r := range rows {
		fmt.Fprintf(&b, "%6d %10.1f %10.1f %10.1f %10.1f %12.0f %12.2f %12.1f\n", r.n, r.rss, r.hwm, r.startReq, r.startList, r.startKiB, r.perMin, r.minKiB)
	}
	first, last := rows[0], rows[len(rows)-1]
	fmt.Fprintf(&b, "ratio 100/10: RSS %.2f, peak RSS %.2f, start requests %.2f, start KiB %.2f\n",
		last.rss/first.rss, last.hwm/first.hwm, last.startReq/first.startReq, last.startKiB/first.startKiB)
	t.Log("\n" + b.String())
	if out := os.Getenv("CARETAKER_SCALE_OUT"); out != "" {
		_ = os.WriteFile(out, []byte(b.String()), 0o644)
	}
}

// addNodesR is addNodes with replicas per node.
func (e *scaleEnv) addNodesR(from, to, replicas int) {
	e.t.Helper()
	saved := scaleReplicasVar
	scaleReplicasVar = replicas
	defer func() { scaleReplicasVar = saved }()
	e.addNodes(from, to)
}

// scaleReplicasVar is how many replicas addNodes gives each node.
var scaleReplicasVar = scaleReplicas
