package agent_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestMetricsCountScansCreatesAndPurges runs the agent with -metrics-addr
// and reads its /metrics as Prometheus would: the scans, the Orphan
// created for the lost directory and its purge after a user's delete
// appear under caretaker's metric names.
func TestMetricsCountScansCreatesAndPurges(t *testing.T) {
	e := newEnv(t)
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	e.orphanDir(d, orphanDirA)
	p := e.startAgent("node-1", "-metrics-addr=127.0.0.1:0")
	name := longhornName(d, orphanDirA)
	e.waitOrphans("node-1", name)
	url := "http://" + metricsAddr(e, p.log) + "/metrics"

	e.deleteOrphan(name)
	e.waitGone(name)
	want := []*regexp.Regexp{
		regexp.MustCompile(`(?m)^caretaker_orphan_scans_total\{outcome="ok"\} [1-9][0-9]*$`),
		regexp.MustCompile(`(?m)^caretaker_orphan_scan_duration_seconds_count\{outcome="ok"\} [1-9][0-9]*$`),
		regexp.MustCompile(`(?m)^caretaker_orphan_sync_steps_total\{kind="replica",op="create",outcome="ok"\} [1-9][0-9]*$`),
		// Exactly one purge: a second one would be a purge of nothing.
		regexp.MustCompile(`(?m)^caretaker_orphan_sync_steps_total\{kind="replica",op="purge",outcome="ok"\} 1$`),
		regexp.MustCompile(`(?m)^caretaker_orphan_sync_step_duration_seconds_count\{kind="replica",op="purge"\} [1-9][0-9]*$`),
		regexp.MustCompile(`(?m)^go_goroutines `),
	}
	e.waitFor("the scans, the create and the purge in "+url, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		for _, re := range want {
			if !re.Match(body) {
				return fmt.Errorf("no line matching %s in:\n%s", re, caretakerLines(string(body)))
			}
		}
		if strings.Contains(string(body), name) {
			return fmt.Errorf("a record's name %s is in a label: one series per record", name)
		}
		return nil
	})
}

// metricsAddr reads the address the agent listens on for metrics from
// its log ("serving metrics" addr=...).
func metricsAddr(e *env, logPath string) string {
	re := regexp.MustCompile(`msg="serving metrics" addr=(\S+)`)
	var addr string
	e.waitFor("the agent to serve metrics", func() error {
		data, err := os.ReadFile(logPath)
		if err != nil {
			return err
		}
		m := re.FindSubmatch(data)
		if m == nil {
			return errors.New("no \"serving metrics\" line in the agent's log yet")
		}
		addr = string(m[1])
		return nil
	})
	return addr
}

func caretakerLines(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "caretaker_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
