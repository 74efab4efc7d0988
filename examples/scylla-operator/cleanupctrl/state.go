package cleanupctrl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/caretaker-storage/caretaker/tokenring"
)

// stateKey is the ConfigMap's data key.
const stateKey = "state.json"

// ErrInvalidState: the state ConfigMap holds something this controller
// cannot use (hand-edited or corrupt). Nothing is guessed from it: the
// controller stops acting on the cluster until it is fixed or deleted.
var ErrInvalidState = errors.New("cleanupctrl: invalid state ConfigMap")

// State is the controller's progress, kept in one ConfigMap.
type State struct {
	// Baselines says, per node, the topology its disk is clean for.
	Baselines tokenring.Baselines `json:"baselines"`
	// Topologies are those Jobs clean for, each once.
	Topologies []tokenring.Topology `json:"topologies,omitempty"`
	// Jobs maps a member Service's name to its cleanup Job's record,
	// written before the Job is created.
	Jobs map[string]JobRecord `json:"jobs,omitempty"`
	// Attempts counts failed Jobs per member Service since its last
	// success.
	Attempts map[string]int `json:"attempts,omitempty"`
}

// JobRecord is what the controller knows of one cleanup Job.
type JobRecord struct {
	Endpoint string `json:"endpoint"`
	// Hash is the Job's cleanup-token-ring-hash.
	Hash string `json:"hash"`
	// Topology indexes State.Topologies: the topology the Job cleans for,
	// which becomes the node's baseline when it succeeds.
	Topology int `json:"topology"`
	// Recorded: the success is in the baselines; what is left is to
	// annotate the Service and delete the Job.
	Recorded bool `json:"recorded,omitempty"`
	// Stopped: the Job failed and the node's cleanups were stopped.
	Stopped bool `json:"stopped,omitempty"`
}

// topologyIndex returns t's index in s.Topologies, adding it if new.
func (s *State) topologyIndex(t tokenring.Topology) int {
	if i := slices.IndexFunc(s.Topologies, func(u tokenring.Topology) bool { return reflect.DeepEqual(t, u) }); i >= 0 {
		return i
	}
	s.Topologies = append(s.Topologies, t)
	return len(s.Topologies) - 1
}

// compact drops topologies no Job refers to.
func (s *State) compact() {
	used := map[int]int{}
	var kept []tokenring.Topology
	for _, name := range sortedKeys(s.Jobs) {
		rec := s.Jobs[name]
		if _, ok := used[rec.Topology]; !ok {
			used[rec.Topology] = len(kept)
			kept = append(kept, s.Topologies[rec.Topology])
		}
		rec.Topology = used[rec.Topology]
		s.Jobs[name] = rec
	}
	s.Topologies = kept
}

// validate refuses a record with dangling indexes or bad baselines.
func (s State) validate() error {
	if err := s.Baselines.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidState, err)
	}
	for name, rec := range s.Jobs {
		if rec.Topology < 0 || rec.Topology >= len(s.Topologies) || rec.Endpoint == "" || rec.Hash == "" {
			return fmt.Errorf("%w: job record of %q is incomplete", ErrInvalidState, name)
		}
	}
	for i, t := range s.Topologies {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("%w: topology %d: %w", ErrInvalidState, i, err)
		}
	}
	return nil
}

// stateStore reads and writes the State ConfigMap with optimistic
// concurrency: a write based on an old read fails with a conflict, and the
// reconcile starts over.
type stateStore struct {
	c       client.Client
	reader  client.Reader
	ns      string
	name    string
	version string // resourceVersion of the last read; "" when absent
}

// load reads the state; an absent ConfigMap is the empty state.
func (s *stateStore) load(ctx context.Context) (State, error) {
	var cm corev1.ConfigMap
	err := s.reader.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: s.name}, &cm)
	if apierrors.IsNotFound(err) {
		s.version = ""
		return State{}, nil
	}
	if err != nil {
		return State{}, err
	}
	s.version = cm.ResourceVersion
	var st State
	if err := json.Unmarshal([]byte(cm.Data[stateKey]), &st); err != nil {
		return State{}, fmt.Errorf("%w: %s/%s: %v", ErrInvalidState, s.ns, s.name, err)
	}
	if err := st.validate(); err != nil {
		return State{}, err
	}
	return st, nil
}

// save writes the state over the version last read.
func (s *stateStore) save(ctx context.Context, st State) error {
	st.compact()
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	cm := corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.name, ResourceVersion: s.version},
		Data:       map[string]string{stateKey: string(b)},
	}
	if s.version == "" {
		err = s.c.Create(ctx, &cm)
	} else {
		err = s.c.Update(ctx, &cm)
	}
	if err != nil {
		return fmt.Errorf("saving %s/%s: %w", s.ns, s.name, err)
	}
	s.version = cm.ResourceVersion
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
