// Command spdk-inventory lists the v2 engines (RAID bdevs) and replicas
// (head lvols) in a node's SPDK target, and, given the engines and replicas
// the cluster expects, says which are orphans and why (seed 001's instance
// judgement). It deletes nothing unless asked with -delete, and then only
// what it judged an orphan, with the UUID re-checked at the moment of
// deletion.
//
//	spdk-inventory [-socket /var/tmp/spdk.sock] [-node node-1] [-instance-manager im-name]
//	               [-expected expected.json [-delete]]
//
// The expected file is JSON:
//
//	{
//	  "engines":  [{"name": "vol-e-0"}],
//	  "replicas": [{"name": "vol-r-0a1b2c3d", "desiredState": "stopped", "currentState": "stopped"}]
//	}
//
// Each entry is a record the cluster has for this node (Longhorn: an
// Engine or Replica custom resource). Omitted fields default to a healthy
// record of this node: desiredState and currentState "running", ownerNode
// -node, instanceManager -instance-manager. An instance with no entry has
// no record: it is an orphan. Unknown fields are an error, so a typo never
// turns an expected object into an orphan.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
)

// maxExpectedSize bounds the expected file; a real one is a few KiB.
const maxExpectedSize = 16 << 20

// Expected is the file -expected reads.
type Expected struct {
	Engines  []ExpectedInstance `json:"engines"`
	Replicas []ExpectedInstance `json:"replicas"`
}

// ExpectedInstance is one engine or replica record.
type ExpectedInstance struct {
	Name            string `json:"name"`
	DesiredState    string `json:"desiredState,omitempty"`
	CurrentState    string `json:"currentState,omitempty"`
	OwnerNode       string `json:"ownerNode,omitempty"`
	InstanceManager string `json:"instanceManager,omitempty"`
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "spdk-inventory:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("spdk-inventory", flag.ContinueOnError)
	socket := fs.String("socket", spdk.DefaultSocketPath, "SPDK JSON-RPC Unix socket")
	node := fs.String("node", hostname(), "this node's ID")
	im := fs.String("instance-manager", "instance-manager", "this node's v2 instance manager name")
	expectedPath := fs.String("expected", "", "JSON file of the engines and replicas the cluster expects (see the command doc)")
	del := fs.Bool("delete", false, "delete the orphans found (needs -expected)")
	timeout := fs.Duration("timeout", 30*time.Second, "overall timeout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *del && *expectedPath == "" {
		return errors.New("-delete needs -expected: without the expected set nothing can be judged an orphan")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	client := spdk.NewClient(spdk.Options{SocketPath: *socket})
	defer client.Close()
	inv := &spdk.Inventory{RPC: client, NodeID: *node, InstanceManager: *im}
	snap, err := inv.Scan(ctx)
	if err != nil {
		return err
	}

	var judge orphan.Judge
	if *expectedPath != "" {
		exp, err := readExpected(*expectedPath)
		if err != nil {
			return err
		}
		judge = orphan.InstanceJudge{Lookup: exp.lookup(*node, *im)}
	}

	var orphans []orphan.Item
	for _, it := range snap.Items {
		line := fmt.Sprintf("%-16s %-40s %s", it.Kind, it.Param(orphan.ParamInstanceName), it.Param(orphan.ParamInstanceUUID))
		if judge != nil {
			v, err := judge.Judge(ctx, it)
			if err != nil {
				return err
			}
			line += fmt.Sprintf("  %s: %s", v.Outcome, v.Reason)
			if v.Outcome == orphan.OutcomeOrphan {
				orphans = append(orphans, it)
			}
		}
		fmt.Fprintln(w, line)
	}
	for _, s := range snap.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", s.Name, s.Reason)
	}
	if judge == nil {
		return nil
	}
	fmt.Fprintf(w, "%d orphan(s)\n", len(orphans))
	if !*del {
		return nil
	}

	d := &spdk.Deleter{RPC: client, NodeID: *node, InstanceManager: *im}
	var errs []error
	for _, it := range orphans {
		r, err := orphan.NewRecord(it, time.Time{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Judge again right before deleting, as orphan.Sweeper does.
		if v, err := judge.Judge(ctx, it); err != nil || v.Outcome != orphan.OutcomeOrphan {
			fmt.Fprintf(w, "kept %s: no longer judged an orphan\n", it.Param(orphan.ParamInstanceName))
			continue
		}
		switch err := d.Delete(ctx, r); {
		case errors.Is(err, orphan.ErrPreconditionFailed):
			fmt.Fprintf(w, "refused %s: %v\n", it.Param(orphan.ParamInstanceName), err)
		case err != nil:
			errs = append(errs, fmt.Errorf("deleting %s: %w", it.Param(orphan.ParamInstanceName), err))
		default:
			fmt.Fprintf(w, "deleted %s %s\n", it.Kind, it.Param(orphan.ParamInstanceName))
		}
	}
	return errors.Join(errs...)
}

func readExpected(path string) (*Expected, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxExpectedSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxExpectedSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxExpectedSize)
	}
	var exp Expected
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&exp); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, list := range [][]ExpectedInstance{exp.Engines, exp.Replicas} {
		for i, e := range list {
			if e.Name == "" {
				return nil, fmt.Errorf("%s: entry %d has no name", path, i)
			}
		}
	}
	return &exp, nil
}

// lookup turns the expected set into the host's view of its records.
func (e *Expected) lookup(node, im string) orphan.InstanceLookup {
	views := map[string]orphan.InstanceView{}
	add := func(kind orphan.Kind, list []ExpectedInstance) {
		for _, x := range list {
			v := orphan.InstanceView{
				Exists:          true,
				DesiredState:    orphan.InstanceState(or(x.DesiredState, "running")),
				CurrentState:    orphan.InstanceState(or(x.CurrentState, "running")),
				OwnerNodeID:     or(x.OwnerNode, node),
				InstanceManager: or(x.InstanceManager, im),
			}
			views[string(kind)+"/"+x.Name] = v
		}
	}
	add(orphan.KindEngineInstance, e.Engines)
	add(orphan.KindReplicaInstance, e.Replicas)
	return orphan.InstanceLookupFunc(func(_ context.Context, kind orphan.Kind, name string) (orphan.InstanceView, error) {
		return views[string(kind)+"/"+name], nil
	})
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "node"
	}
	return h
}
