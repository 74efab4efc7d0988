// Command spdk-inventory lists the v2 engines (RAID bdevs) and replicas
// (head lvols) in a node's SPDK target, with the NVMe-oF subsystems that
// expose them and the NVMe controllers engines attached to remote
// replicas, and, given the engines and replicas
// the cluster has records of, says which are orphans and why
// (instance.Verdict). It deletes nothing unless asked with -delete
// -yes, and then only what it judged an orphan, re-checked at the moment
// of deletion: the UUID, and for a replica that no replica record of its
// name exists (a v2 replica's lvols are its data).
//
//	spdk-inventory [-socket /var/tmp/spdk.sock] -node node-1 -instance-manager im-name
//	               [-expected records.json [-delete -yes [-allow-mass-delete]]]
//
// The expected file is the cluster's Engine and Replica records, straight
// from kubectl:
//
//	kubectl -n longhorn-system get engines.longhorn.io,replicas.longhorn.io -o json > records.json
//
// (Without "-n longhorn-system" kubectl prints {"items":[]} and every
// object would look orphaned: see -allow-mass-delete.) It may also be
// written by hand:
//
//	{
//	  "engines":  [{"name": "vol-e-0"}],
//	  "replicas": [{"name": "vol-r-0a1b2c3d", "desireState": "stopped", "currentState": "stopped"}]
//	}
//
// Each entry is a record the cluster has. The hand-written form takes
// Longhorn's field names (spec.desireState, status.currentState,
// status.ownerID, status.instanceManagerName), and also the spellings
// desiredState, ownerNode and instanceManager it took before; giving both
// spellings of one field with different values is an error. Omitted
// fields default to a healthy record of this node: desireState and
// currentState "running", ownerID -node, instanceManagerName
// -instance-manager. Unknown fields are an error naming the field, so a
// typo never turns an expected object into an orphan. An instance with no
// entry has no record: it is an orphan.
//
// -delete without -yes is a dry run: it lists what it would delete, deletes
// nothing and exits 3 (0 when there is nothing to delete). -delete refuses, unless -allow-mass-delete is given,
// when the list looks broken rather than real: it holds no record at all
// while SPDK holds objects, or every object (at least three) was judged an
// orphan. Exit codes: 0 done (or nothing to do), 1 failed, 2 bad usage,
// 3 dry run that would delete, 4 refused by a safety rule (the list looks
// broken, the node's view is not ready, a deletion's re-check).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/caretaker-storage/caretaker/examples/internal/cli"
	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/internal/bounded"
	"github.com/caretaker-storage/caretaker/internal/safefile"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// maxExpectedSize bounds the expected file; kubectl's output for a large
// cluster is a few MiB.
const maxExpectedSize = 64 << 20

// massOrphanMin is how many objects, all judged orphans, make -delete
// refuse without -allow-mass-delete. A small node where one of two
// objects is an orphan still cleans up.
const massOrphanMin = 3

// Expected is the file -expected reads, in its hand-written form.
type Expected struct {
	Engines  []ExpectedInstance `json:"engines"`
	Replicas []ExpectedInstance `json:"replicas"`
}

// ExpectedInstance is one engine or replica record. The hand-written form
// takes Longhorn's field names and the older spellings; parseHandWritten
// folds each pair into DesiredState, OwnerNode and InstanceManager.
type ExpectedInstance struct {
	Name            string `json:"name"`
	DesiredState    string `json:"desireState,omitempty"` // Longhorn's spec.desireState
	CurrentState    string `json:"currentState,omitempty"`
	OwnerNode       string `json:"ownerID,omitempty"`             // Longhorn's status.ownerID
	InstanceManager string `json:"instanceManagerName,omitempty"` // Longhorn's status.instanceManagerName
	// The spellings the hand-written form took first, still accepted.
	OldDesiredState    string `json:"desiredState,omitempty"`
	OldOwnerNode       string `json:"ownerNode,omitempty"`
	OldInstanceManager string `json:"instanceManager,omitempty"`
	// DesiredNode and Deleting come from kubectl's output (spec.nodeID,
	// metadata.deletionTimestamp); they are not part of the hand-written
	// form.
	DesiredNode string `json:"-"`
	Deleting    bool   `json:"-"`
	fromKube    bool
}

var command = cli.Command{
	Name:  "spdk-inventory",
	Usage: "spdk-inventory [-socket PATH] -node NODE -instance-manager NAME [-expected FILE [-delete [-yes] [-allow-mass-delete]]]",
	About: "spdk-inventory lists this node's Longhorn v2 engines (RAID bdevs) and replicas (head lvols) in its SPDK target " +
		"and, given the cluster's Engine and Replica records with -expected (take them with: " + kubectlRecords + " > records.json), " +
		"says which are orphans and why. With -delete -yes it deletes the orphans, each re-checked at the moment of deletion; " +
		"-delete without -yes lists what it would delete, deletes nothing and exits 3.",
	Refusals: []error{errEmptyExpected, errAllOrphans, orphan.ErrPreconditionFailed},
}

// kubectlRecords is the command that prints the records -expected reads.
const kubectlRecords = "kubectl -n longhorn-system get engines.longhorn.io,replicas.longhorn.io -o json"

func main() {
	os.Exit(runCommand(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// runCommand is the tool's command line: it runs run and returns the
// exit code.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return command.Exit(run(ctx, args, stdout, stderr), stderr)
}

// Errors run reports for flag combinations and broken lists.
var (
	errDeleteNeedsExpected = cli.Usagef("-delete needs -expected: without the cluster's records nothing can be judged an orphan")
	errDeleteNeedsYes      = fmt.Errorf("%w: -delete deletes runtime objects (for replicas: lvols, which are data); nothing was deleted; add -yes to confirm", cli.ErrDryRun)
	errEmptyExpected       = errors.New("refusing -delete: the expected list has no engine or replica record while SPDK holds objects; an empty list is the classic accident (kubectl without -n longhorn-system prints {\"items\":[]}); pass -allow-mass-delete if this node really should hold nothing")
	errAllOrphans          = errors.New("refusing -delete: every object on this node was judged an orphan; that is what a list from the wrong cluster or namespace looks like; check the list, or pass -allow-mass-delete")
)

func run(ctx context.Context, args []string, w, stderr io.Writer) error {
	fs := command.FlagSet()
	socket := fs.String("socket", spdkrpc.DefaultSocketPath, "SPDK JSON-RPC Unix socket")
	node := fs.String("node", "", "this node's ID, as in the records' status.ownerID (required)")
	im := fs.String("instance-manager", "", "this node's v2 instance manager name, as in the records' status.instanceManagerName (required)")
	expectedPath := fs.String("expected", "", "a `file` of the cluster's engine and replica records: the output of\n  "+kubectlRecords+"\n(or the hand-written form in the command doc)")
	del := fs.Bool("delete", false, "delete the orphans found (needs -expected; without -yes, a dry run)")
	yes := fs.Bool("yes", false, "confirm -delete")
	allowMass := fs.Bool("allow-mass-delete", false, "let -delete proceed when the expected list is empty while objects exist, or every object (at least 3) is judged an orphan")
	timeout := fs.Duration("timeout", 30*time.Second, "overall timeout")
	if err := command.Parse(fs, args, w, stderr); err != nil {
		return err
	}
	var missing []string
	for _, f := range []struct{ name, value string }{{"-node", *node}, {"-instance-manager", *im}} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return cli.Usagef("%s required (-node and -instance-manager are: the records name both)", strings.Join(missing, ", "))
	}
	if *del && *expectedPath == "" {
		return errDeleteNeedsExpected
	}
	if err := cli.YesWithout(*yes && !*del, "-delete"); err != nil {
		return err
	}
	var exp *Expected
	if *expectedPath != "" {
		var err error
		if exp, err = readExpected(*expectedPath); err != nil {
			return fmt.Errorf("-expected %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	client, err := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: *socket})
	if err != nil {
		return fmt.Errorf("-socket: %w", err)
	}
	defer client.Close()
	records := instance.Lookup(noRecordsGiven{})
	if exp != nil {
		records = exp.lookup(*node, *im)
	}
	adapter, err := spdk.NewOrphans(client, records, spdk.Options{NodeID: *node, InstanceManager: *im})
	if err != nil {
		return err
	}
	snap, err := adapter.Scan(ctx)
	if err != nil {
		return err
	}

	var orphans []orphan.Item
	for _, it := range snap.Items {
		line := fmt.Sprintf("%-16s %-40s %s", it.Kind, it.Param(orphan.ParamInstanceName), it.Param(orphan.ParamInstanceUUID))
		if exp != nil {
			v, err := adapter.Judge(ctx, it)
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
		if strings.HasPrefix(s.Reason, "nvmf: ") {
			continue // listed with the exposures below
		}
		fmt.Fprintf(w, "skipped %s: %s\n", s.Name, s.Reason)
	}
	if err := listExposures(ctx, w, client, adapter, exp != nil); err != nil {
		return err
	}
	for scope, st := range snap.Scopes {
		if st.Health != orphan.HealthReady {
			fmt.Fprintf(w, "node %s is %s: %s\n", scope, st.Health, st.Message)
		}
	}
	if exp == nil {
		return nil
	}
	fmt.Fprintln(w, cli.Count(len(orphans), "orphan"))
	if !*del {
		return nil
	}
	if st := snap.Scopes[orphan.Scope{NodeID: *node}]; st.Health != orphan.HealthReady {
		return cli.Refused(fmt.Errorf("refusing -delete: the node's view is %s: %s", st.Health, st.Message))
	}
	if !*allowMass {
		switch objects := len(snap.Items) + len(snap.Skipped); {
		case exp.count() == 0 && objects > 0:
			return errEmptyExpected
		case len(orphans) == len(snap.Items) && len(orphans) >= massOrphanMin:
			return errAllOrphans
		}
	}
	if len(orphans) == 0 {
		return nil // nothing to delete, with or without -yes
	}
	if !*yes {
		fmt.Fprintf(w, "dry run: -delete would delete %s:\n", cli.Count(len(orphans), "orphan"))
		for _, it := range orphans {
			fmt.Fprintf(w, "  %s %s\n", it.Kind, it.Param(orphan.ParamInstanceName))
		}
		fmt.Fprintln(w, "add -yes to delete them")
		return errDeleteNeedsYes
	}

	var errs *multierror.Error
	var refused error
	for _, it := range orphans {
		r, err := orphan.NewRecord(it, time.Time{})
		if err != nil {
			errs = multierror.Append(errs, err)
			continue
		}
		// Judge again right before deleting, as orphan.Sweeper does.
		if v, err := adapter.Judge(ctx, it); err != nil || v.Outcome != orphan.OutcomeOrphan {
			fmt.Fprintf(w, "kept %s: no longer judged an orphan\n", it.Param(orphan.ParamInstanceName))
			continue
		}
		switch err := adapter.Delete(ctx, r); {
		case errors.Is(err, orphan.ErrPreconditionFailed):
			refused = fmt.Errorf("refused %s: %w", it.Param(orphan.ParamInstanceName), err)
			fmt.Fprintln(w, refused)
		case err != nil:
			errs = multierror.Append(errs, fmt.Errorf("deleting %s: %w", it.Param(orphan.ParamInstanceName), err))
		default:
			fmt.Fprintf(w, "deleted %s %s\n", it.Kind, it.Param(orphan.ParamInstanceName))
		}
	}
	if err := errs.ErrorOrNil(); err != nil {
		return err // a failure outranks a refusal
	}
	return refused
}

// listExposures lists the NVMe-oF subsystems and the NVMe controllers,
// with the engine or replica each belongs to and, when judged, the
// verdict: a subsystem or controller goes with its engine's or replica's
// deletion; the others are only reported.
func listExposures(ctx context.Context, w io.Writer, c spdkrpc.Caller, adapter *spdk.Orphans, judged bool) error {
	inv, rt, err := spdk.ReadExposures(ctx, c)
	if err != nil {
		return err
	}
	findings := adapter.JudgeExposures(ctx, inv, rt)
	owner := func(o spdk.Owner, note string) string {
		if !o.Attributed() {
			return "unattributed (" + note + ")"
		}
		return fmt.Sprintf("%s %s (by %s)", o.Kind, o.Name, o.By)
	}
	verdict := func(i int) string {
		if !judged {
			return ""
		}
		f := findings[i]
		with := ""
		if f.WithOwner {
			with = ", goes with its " + string(f.Owner.Kind)
		}
		return fmt.Sprintf("  %s%s: %s", f.Verdict.Outcome, with, f.Verdict.Reason)
	}
	for i, s := range inv.Subsystems {
		ns := make([]string, len(s.Namespaces))
		for j, n := range s.Namespaces {
			ns[j] = fmt.Sprintf("%d=%s", n.NSID, n.BdevName)
		}
		fmt.Fprintf(w, "subsystem %s serial %q namespaces [%s] %s%s\n", s.NQN, s.SerialNumber, strings.Join(ns, " "), owner(s.Owner, s.Note), verdict(i))
	}
	for i, c := range inv.Controllers {
		paths := make([]string, len(c.Paths))
		for j, p := range c.Paths {
			paths[j] = fmt.Sprintf("%s:%s %s", p.Traddr, p.Trsvcid, p.SubNQN)
		}
		fmt.Fprintf(w, "controller %s -> [%s] bdevs [%s] used by [%s] %s%s\n", c.Name, strings.Join(paths, ", "),
			strings.Join(c.Bdevs, " "), strings.Join(c.UsedBy, " "), owner(c.Owner, c.Note), verdict(len(inv.Subsystems)+i))
	}
	return nil
}

// noRecordsGiven is the record lookup of a run without -expected: the
// tool only lists, and a lookup that always fails judges nothing an
// orphan and lets nothing be deleted.
type noRecordsGiven struct{}

func (noRecordsGiven) LookupInstance(context.Context, orphan.Kind, string) (instance.View, error) {
	return instance.View{}, errors.New("no -expected file: the cluster's records are unknown")
}

func readExpected(path string) (*Expected, error) {
	// A FIFO or device would block the open itself: safefile looks first.
	f, _, err := safefile.OpenRegular(safefile.Dir{}, path)
	if err != nil {
		return nil, withPath(path, err)
	}
	defer f.Close()
	data, err := bounded.ReadAll(f, maxExpectedSize, path)
	if err != nil {
		return nil, withPath(path, err)
	}
	var probe struct {
		Items json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var exp *Expected
	if probe.Items != nil {
		exp, err = parseKubeList(data)
	} else {
		exp, err = parseHandWritten(data)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return exp, nil
}

// withPath prefixes err with path unless it names it already.
func withPath(path string, err error) error {
	if strings.Contains(err.Error(), path) {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// handWrittenFields lists the fields an entry of the hand-written form
// may have, for the error about an unknown one.
const handWrittenFields = "name, desireState (or desiredState), currentState, ownerID (or ownerNode), instanceManagerName (or instanceManager)"

func parseHandWritten(data []byte) (*Expected, error) {
	var exp Expected
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&exp); err != nil {
		if strings.Contains(err.Error(), "unknown field") {
			return nil, fmt.Errorf("%w; the file takes \"engines\" and \"replicas\", each a list of entries with the fields %s", err, handWrittenFields)
		}
		return nil, err
	}
	for _, l := range []struct {
		key  string
		list []ExpectedInstance
	}{{"engines", exp.Engines}, {"replicas", exp.Replicas}} {
		for i := range l.list {
			e := &l.list[i]
			if e.Name == "" {
				return nil, fmt.Errorf("%s entry %d has no name", l.key, i)
			}
			for _, f := range []struct {
				longhorn, old string
				value         *string
				oldValue      string
			}{
				{"desireState", "desiredState", &e.DesiredState, e.OldDesiredState},
				{"ownerID", "ownerNode", &e.OwnerNode, e.OldOwnerNode},
				{"instanceManagerName", "instanceManager", &e.InstanceManager, e.OldInstanceManager},
			} {
				switch {
				case f.oldValue == "":
				case *f.value == "":
					*f.value = f.oldValue
				case *f.value != f.oldValue:
					return nil, fmt.Errorf("%s entry %d (%s): %s %q and %s %q disagree; give one (Longhorn's name is %s)",
						l.key, i, e.Name, f.longhorn, *f.value, f.old, f.oldValue, f.longhorn)
				}
			}
		}
	}
	return &exp, nil
}

// kubeObject is what the tool reads of an Engine or Replica custom
// resource in kubectl's JSON output.
type kubeObject struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name              string  `json:"name"`
		DeletionTimestamp *string `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		DesireState string `json:"desireState"`
		NodeID      string `json:"nodeID"`
	} `json:"spec"`
	Status struct {
		CurrentState        string `json:"currentState"`
		OwnerID             string `json:"ownerID"`
		InstanceManagerName string `json:"instanceManagerName"`
	} `json:"status"`
}

// parseKubeList reads kubectl's List of Engine and Replica objects. Any
// other kind is an error: a list of volumes or pods passed by mistake must
// not make every runtime object look orphaned.
func parseKubeList(data []byte) (*Expected, error) {
	var list struct {
		Items []kubeObject `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, err
	}
	exp := &Expected{}
	for i, o := range list.Items {
		if o.Metadata.Name == "" {
			return nil, fmt.Errorf("item %d has no metadata.name", i)
		}
		e := ExpectedInstance{
			Name:            o.Metadata.Name,
			DesiredState:    o.Spec.DesireState,
			CurrentState:    o.Status.CurrentState,
			OwnerNode:       o.Status.OwnerID,
			InstanceManager: o.Status.InstanceManagerName,
			DesiredNode:     o.Spec.NodeID,
			Deleting:        o.Metadata.DeletionTimestamp != nil,
			fromKube:        true,
		}
		switch o.Kind {
		case "Engine":
			exp.Engines = append(exp.Engines, e)
		case "Replica":
			exp.Replicas = append(exp.Replicas, e)
		default:
			return nil, fmt.Errorf("item %d (%s) is of kind %q; want Engine or Replica (%s)", i, o.Metadata.Name, o.Kind, kubectlRecords)
		}
	}
	return exp, nil
}

func (e *Expected) count() int { return len(e.Engines) + len(e.Replicas) }

// lookup turns the expected set into the host's view of its records.
// Hand-written entries get the documented defaults; kubectl's objects are
// taken as they are.
func (e *Expected) lookup(node, im string) instance.Lookup {
	views := map[string]instance.View{}
	add := func(kind orphan.Kind, list []ExpectedInstance) {
		for _, x := range list {
			v := instance.View{
				Exists:          true,
				Deleting:        x.Deleting,
				DesiredState:    instance.State(x.DesiredState),
				CurrentState:    instance.State(x.CurrentState),
				DesiredNodeID:   x.DesiredNode,
				OwnerNodeID:     x.OwnerNode,
				InstanceManager: x.InstanceManager,
			}
			if !x.fromKube {
				v.DesiredState = instance.State(or(x.DesiredState, "running"))
				v.CurrentState = instance.State(or(x.CurrentState, "running"))
				v.OwnerNodeID = or(x.OwnerNode, node)
				v.InstanceManager = or(x.InstanceManager, im)
			}
			views[string(kind)+"/"+x.Name] = v
		}
	}
	add(orphan.KindEngineInstance, e.Engines)
	add(orphan.KindReplicaInstance, e.Replicas)
	counts := map[orphan.Kind]int{}
	for k := range views {
		kind, _, _ := strings.Cut(k, "/")
		counts[orphan.Kind(kind)]++
	}
	return expectedLookup{views: views, counts: counts}
}

// expectedLookup is the expected set as the host's view of its records.
// It counts them too (spdk.RecordCounter), so an -expected file that
// lists no engine (or no replica) beside SPDK's runtime objects makes
// the guard refuse every purge of that kind: a file that lists nothing
// is far more often a wrong file than a node of orphans.
type expectedLookup struct {
	views  map[string]instance.View // by kind/name
	counts map[orphan.Kind]int
}

func (l expectedLookup) LookupInstance(_ context.Context, kind orphan.Kind, name string) (instance.View, error) {
	return l.views[string(kind)+"/"+name], nil
}

func (l expectedLookup) CountInstances(_ context.Context, kind orphan.Kind) (int, error) {
	return l.counts[kind], nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
