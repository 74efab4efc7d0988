package agent_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
)

// extraAgentArgs are added to every agent process's arguments.
var extraAgentArgs []string

// TestScaleColdStart is the cold part of make scale: a cluster of
// CARETAKER_SCALE_STORM_NODES nodes (default 60) with
// CARETAKER_SCALE_REPLICAS replicas per node (default 20) and one
// orphaned directory per node, no Orphan recorded yet, and every agent
// process started at the same moment (a new install, or a cluster
// brought up from nothing). Each agent then has a candidate no
// confirmation covered, so each also takes a full list of the Replicas
// before it records. It reports the time until every agent's informers
// synced and until every node's Orphan was recorded, the 429s, each
// agent's requests, LISTs and bytes, and kube-apiserver's and etcd's
// peak RSS and CPU seconds.
//
// CARETAKER_SCALE_COLD_SPREAD, a duration, starts the agents with
// -first-confirm-spread set to it.
func TestScaleColdStart(t *testing.T) {
	if os.Getenv(scaleReportEnv) == "" {
		t.Skip("set " + scaleReportEnv + "=1 (make scale) to run the scale report; it takes minutes")
	}
	spread := os.Getenv("CARETAKER_SCALE_COLD_SPREAD")
	if spread != "" {
		extraAgentArgs = []string{"-first-confirm-spread=" + spread}
		defer func() { extraAgentArgs = nil }()
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
	setup := time.Now()
	e.addNodesR(0, nodes, replicas)
	t.Logf("%d nodes × %d replicas created in %s", nodes, replicas, time.Since(setup).Round(time.Second))
	apiPID, etcdPID := c.PID("kube-apiserver"), c.PID("etcd")
	time.Sleep(2 * time.Second) // the creations' own load passes
	peakReset := resetPeak(apiPID) && resetPeak(etcdPID)
	_, api0 := procUsage(apiPID)
	_, etcd0 := procUsage(etcdPID)

	start := time.Now()
	agents := make([]*stormAgent, nodes)
	for i := range agents {
		agents[i] = e.startStormAgent(scaleNode(i), ac.BearerToken, 1)
	}
	var synced, recorded time.Duration
	unsynced, orphans := nodes, 0
	recordedAt := map[string]time.Duration{} // by node
	for deadline := start.Add(timeout); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if synced == 0 {
			unsynced = 0
			for _, a := range agents {
				if !a.pollSynced() {
					unsynced++
				}
			}
			if unsynced == 0 {
				synced = time.Since(start)
			}
		}
		if list, err := e.orphans().List(context.Background(), metav1.ListOptions{}); err == nil {
			orphans = len(list.Items)
			for i := range list.Items {
				if n := list.Items[i].GetLabels()["longhornnode"]; recordedAt[n] == 0 {
					recordedAt[n] = time.Since(start)
				}
			}
		}
		if orphans == nodes && recorded == 0 {
			recorded = time.Since(start)
		}
		if synced > 0 && recorded > 0 {
			break
		}
	}
	time.Sleep(5 * time.Second)
	var agentCPU float64
	for _, a := range agents {
		_, cpu := procUsage(a.cmd.Process.Pid)
		agentCPU += cpu
	}
	times := slices.Sorted(maps.Values(recordedAt))
	var p50 time.Duration
	if len(times) > 0 {
		p50 = times[len(times)/2]
	}
	apiPeak, apiCPU := procUsage(apiPID)
	etcdPeak, etcdCPU := procUsage(etcdPID)
	apiCPU -= api0
	etcdCPU -= etcd0
	var n429 int64
	var reqMean, listMean, kibMean, kibMax float64
	reqMax := 0
	for _, a := range agents {
		p := a.proxy
		req, kib := p.rc.total(), float64(p.rc.bytes.Load())/1024
		n429 += p.n429.Load()
		reqMean += float64(req) / float64(nodes)
		listMean += float64(p.rc.snapshot()["list"]) / float64(nodes)
		kibMean += kib / float64(nodes)
		reqMax, kibMax = max(reqMax, req), max(kibMax, kib)
	}
	show := func(d time.Duration, missing int, what string) string {
		if d == 0 {
			return fmt.Sprintf("%d %s", missing, what)
		}
		return fmt.Sprintf("%.1f", d.Seconds())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cold start: %d nodes, one agent process each started at once, %d replicas per node, one orphan per node, first-confirm-spread %q; per agent: mean (max)\n", nodes, replicas, spread)
	fmt.Fprintf(&b, "%9s %11s %6s %16s %10s %18s %12s %8s %13s %9s\n",
		"synced s", "recorded s", "429s", "requests", "LISTs", "KiB", "API peak MiB", "API CPU", "etcd peak MiB", "etcd CPU")
	fmt.Fprintf(&b, "%9s %11s %6d %7.1f (%6d) %10.1f %8.0f (%7.0f) %12.0f %7.1fs %13.0f %8.1fs\n",
		show(synced, unsynced, "not"), show(recorded, nodes-orphans, "missing"), n429, reqMean, reqMax, listMean, kibMean, kibMax, apiPeak, apiCPU, etcdPeak, etcdCPU)
	fmt.Fprintf(&b, "a node's Orphan recorded after %.1f s (median), %.1f s (last); the agents' CPU %.1f s in all\n", p50.Seconds(), recorded.Seconds(), agentCPU)
	if !peakReset {
		b.WriteString("  (could not reset the peak RSS; it is the peak since the process started)\n")
	}
	t.Log("\n" + b.String())
	if out := os.Getenv("CARETAKER_SCALE_COLD_OUT"); out != "" {
		_ = os.WriteFile(out, []byte(b.String()), 0o644)
	}
	if synced == 0 {
		t.Errorf("%d of %d agents did not sync in %s", unsynced, nodes, timeout)
	}
	if recorded == 0 {
		t.Errorf("%d of %d nodes' Orphans were not recorded in %s", nodes-orphans, nodes, timeout)
	}
}
