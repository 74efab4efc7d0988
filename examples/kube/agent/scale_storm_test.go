package agent_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
)

// syncedLine is what an agent logs (at info level) once its informers
// have synced and its disk monitor starts.
const syncedLine = "informers synced"

// statusCounter counts the answers of one status code, e.g. the 429s
// API priority and fairness sends when it sheds load.
type statusCounter struct {
	next   http.RoundTripper
	code   int
	counts *atomic.Int64
}

func (s statusCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(r)
	if err == nil && resp.StatusCode == s.code {
		s.counts.Add(1)
	}
	return resp, err
}

// stormAgent is an agent process of the storm report, logging at info
// level to a file of its own so that the report sees when its informers
// synced.
type stormAgent struct {
	*reportAgent
	log     string
	started time.Time
	synced  time.Duration // 0 until the log says so
}

func (e *scaleEnv) startStormAgent(node, token string, gen int) *stormAgent {
	e.t.Helper()
	logPath := filepath.Join(e.base, fmt.Sprintf("agent-%s-%d.log", node, gen))
	lf, err := os.Create(logPath)
	if err != nil {
		e.t.Fatal(err)
	}
	defer lf.Close() // the child has its own descriptor
	a := &stormAgent{log: logPath, started: time.Now()}
	a.reportAgent = e.startProxiedAgent(node, token, "info", lf)
	return a
}

// pollSynced records the agent's time to sync if its log now says so.
func (a *stormAgent) pollSynced() bool {
	if a.synced > 0 {
		return true
	}
	data, _ := os.ReadFile(a.log)
	if bytes.Contains(data, []byte(syncedLine)) {
		a.synced = time.Since(a.started)
		return true
	}
	return false
}

// procUsage is a process's peak RSS in MiB (VmHWM, since the last
// resetPeak) and its CPU seconds so far.
func procUsage(pid int) (peakMiB, cpuSec float64) {
	_, hwm := procStatus(pid)
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return float64(hwm) / 1024, -1
	}
	// The fields after the command's closing parenthesis: utime and stime
	// are the 12th and 13th of them, in clock ticks (100 per second on Linux).
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return float64(hwm) / 1024, (ut + st) / 100
}

// resetPeak resets a process's VmHWM to its current RSS (needs the
// process's owner or root); it reports whether it could.
func resetPeak(pid int) bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestScaleStorm is the restart part of make scale: a cluster of
// CARETAKER_SCALE_STORM_NODES nodes (default 60) with
// CARETAKER_SCALE_REPLICAS replicas per node (default 20) and one agent
// process per node, each behind a proxy that counts its requests, its
// bytes and the 429s priority and fairness answers it. The agents first
// start in waves of ten (setup), then the report measures two storms:
// restarting a third of the agents at once, and restarting all of them at
// once (a cluster-wide reboot, or an API server outage that drops every
// watch). For each it reports the time until every restarted agent's
// informers synced, the 429s, each agent's start requests, LISTs and
// bytes (counted 5 s after the last one synced), and kube-apiserver's and
// etcd's peak RSS and CPU seconds during the storm.
func TestScaleStorm(t *testing.T) {
	if os.Getenv(scaleReportEnv) == "" {
		t.Skip("set " + scaleReportEnv + "=1 (make scale) to run the scale report; it takes minutes")
	}
	c := kubetest.Require(t)
	nodes := envInt("CARETAKER_SCALE_STORM_NODES", 60)
	replicas := envInt("CARETAKER_SCALE_REPLICAS", 20)
	timeout := time.Duration(envInt("CARETAKER_SCALE_STORM_TIMEOUT_S", 360)) * time.Second
	e := &scaleEnv{env: newEnv(t), disks: map[string]disk{}}
	ac, err := clientcmd.BuildConfigFromFlags("", c.AgentKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.addNodesR(0, nodes, replicas)
	t.Logf("%d nodes × %d replicas created in %s", nodes, replicas, time.Since(start).Round(time.Second))
	apiPID, etcdPID := c.PID("kube-apiserver"), c.PID("etcd")

	agents := make([]*stormAgent, nodes)
	gen := 0
	// startAll starts the agents of idx at once and waits until each has
	// synced or timeout passed; it returns how many did not sync.
	startAll := func(idx []int) (unsynced int, last time.Duration) {
		gen++
		for _, i := range idx {
			agents[i] = e.startStormAgent(scaleNode(i), ac.BearerToken, gen)
		}
		deadline := time.Now().Add(timeout)
		for {
			unsynced = 0
			for _, i := range idx {
				if !agents[i].pollSynced() {
					unsynced++
				} else if agents[i].synced > last {
					last = agents[i].synced
				}
			}
			if unsynced == 0 || time.Now().After(deadline) {
				return unsynced, last
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	stopAll := func(idx []int) {
		var wg sync.WaitGroup
		for _, i := range idx {
			wg.Add(1)
			go func() { defer wg.Done(); agents[i].stop() }()
		}
		wg.Wait()
	}

	// Setup: all agents up, in waves of ten, each node's Orphan created.
	for from := 0; from < nodes; from += 10 {
		var wave []int
		for i := from; i < min(from+10, nodes); i++ {
			wave = append(wave, i)
		}
		if n, _ := startAll(wave); n > 0 {
			t.Fatalf("setup: %d agents of nodes %d..%d did not sync in %s", n, from, from+len(wave)-1, timeout)
		}
	}
	e.waitAllOrphans(nodes)
	t.Logf("setup: %d agents synced in waves of ten, %s", nodes, time.Since(start).Round(time.Second))

	type row struct {
		name              string
		agents, unsynced  int
		synced            time.Duration
		n429              int64
		reqMean, listMean float64
		reqMax            int
		kibMean, kibMax   float64
		apiPeak, apiCPU   float64
		etcdPeak, etcdCPU float64
		peakReset         bool
	}
	var rows []row
	third := nodes / 3
	for _, phase := range []struct {
		name string
		n    int
	}{
		{fmt.Sprintf("restart %d of %d", third, nodes), third},
		{fmt.Sprintf("restart all %d", nodes), nodes},
	} {
		idx := make([]int, phase.n)
		for i := range idx {
			idx[i] = i
		}
		stopAll(idx)
		time.Sleep(2 * time.Second) // the server notices the closed watches
		r := row{name: phase.name, agents: phase.n}
		r.peakReset = resetPeak(apiPID) && resetPeak(etcdPID)
		_, api0 := procUsage(apiPID)
		_, etcd0 := procUsage(etcdPID)
		r.unsynced, r.synced = startAll(idx)
		time.Sleep(5 * time.Second)
		r.apiPeak, r.apiCPU = procUsage(apiPID)
		r.etcdPeak, r.etcdCPU = procUsage(etcdPID)
		r.apiCPU -= api0
		r.etcdCPU -= etcd0
		for _, i := range idx {
			p := agents[i].proxy
			req := p.rc.total()
			kib := float64(p.rc.bytes.Load()) / 1024
			r.n429 += p.n429.Load()
			r.reqMean += float64(req) / float64(phase.n)
			r.listMean += float64(p.rc.snapshot()["list"]) / float64(phase.n)
			r.kibMean += kib / float64(phase.n)
			r.reqMax = max(r.reqMax, req)
			r.kibMax = max(r.kibMax, kib)
		}
		rows = append(rows, r)
		t.Logf("%s measured: %+v", phase.name, r)
	}
	stopAll(func() []int {
		idx := make([]int, nodes)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}())

	var b strings.Builder
	fmt.Fprintf(&b, "restart storms: %d nodes, one agent process each, %d replicas per node; per agent: mean (max)\n", nodes, replicas)
	fmt.Fprintf(&b, "%-16s %7s %9s %6s %16s %10s %18s %12s %8s %13s %9s\n",
		"storm", "agents", "synced s", "429s", "start req", "start LIST", "start KiB", "API peak MiB", "API CPU", "etcd peak MiB", "etcd CPU")
	for _, r := range rows {
		synced := fmt.Sprintf("%.1f", r.synced.Seconds())
		if r.unsynced > 0 {
			synced = fmt.Sprintf("%d not", r.unsynced)
		}
		fmt.Fprintf(&b, "%-16s %7d %9s %6d %7.1f (%6d) %10.1f %8.0f (%7.0f) %12.0f %7.1fs %13.0f %8.1fs\n",
			r.name, r.agents, synced, r.n429, r.reqMean, r.reqMax, r.listMean, r.kibMean, r.kibMax, r.apiPeak, r.apiCPU, r.etcdPeak, r.etcdCPU)
		if !r.peakReset {
			fmt.Fprintf(&b, "  (%s: could not reset the peak RSS; it is the peak since the process started)\n", r.name)
		}
	}
	t.Log("\n" + b.String())
	if out := os.Getenv("CARETAKER_SCALE_STORM_OUT"); out != "" {
		_ = os.WriteFile(out, []byte(b.String()), 0o644)
	}
	for _, r := range rows {
		if r.unsynced > 0 {
			t.Errorf("%s: %d agents did not sync in %s", r.name, r.unsynced, timeout)
		}
	}
}
