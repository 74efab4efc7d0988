package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/caretaker-storage/caretaker/internal/bounded"
	"github.com/caretaker-storage/caretaker/internal/safefile"
	"github.com/caretaker-storage/caretaker/tokenring"
)

// stateFile is what -state FILE holds: a CleanupDriver's state, and the
// token ring hash and replication it was planned with.
type stateFile struct {
	// TokenRingHash is the ring's hash when the campaign began, as
	// scylla-operator annotates it. A state recorded on another ring
	// says nothing of this one: its done nodes may have lost ranges
	// since, and need a cleanup again.
	TokenRingHash string `json:"tokenRingHash"`
	// Keyspaces is the replication the campaign was planned with. An
	// ALTER KEYSPACE that lowers a replication factor moves ranges away
	// from nodes without changing the ring's hash, so a state recorded
	// under another replication says nothing of this one either. A file
	// without it (written before it was recorded) is refused the same way.
	Keyspaces map[string]tokenring.Replication `json:"keyspaces"`
	Done      []string                         `json:"done,omitempty"`
	Running   []string                         `json:"running,omitempty"`
}

// maxStateFile bounds what Load reads: a state names each node at most
// once, and even 10,000 nodes take well under a megabyte.
const maxStateFile = 4 << 20

// errOtherRing is wrapped when -state FILE was recorded on another ring,
// or under another replication of the keyspaces.
var errOtherRing = errors.New("the state file was recorded on another token ring or replication")

// fileStateStore is a tokenring.CleanupStateStore in a JSON file, for
// one campaign: the ring whose hash it holds.
//
// Save writes a temporary file beside the target, syncs it, renames it
// over the target and syncs the directory, so that a crash leaves the old
// state or the new one, whole, and Save returns only once the new one is
// durable (the driver records a node as running before it starts it).
// Load reads the file without following it into a FIFO or a device
// (internal/safefile), and a missing file is a new campaign.
type fileStateStore struct {
	path      string
	hash      string                           // the ring's hash now
	keyspaces map[string]tokenring.Replication // the replication planned with now
}

// Load implements tokenring.CleanupStateStore.
func (s fileStateStore) Load(ctx context.Context) (tokenring.CleanupState, error) {
	if err := ctx.Err(); err != nil {
		return tokenring.CleanupState{}, err
	}
	st, err := s.read()
	if err != nil || st == nil {
		return tokenring.CleanupState{}, err
	}
	if st.TokenRingHash != s.hash {
		return tokenring.CleanupState{}, fmt.Errorf("%w: -state %s is of the ring with hash %q, the ring's hash is now %q: "+
			"the nodes it records done may need a cleanup again; move it away to start a new campaign", errOtherRing, s.path, st.TokenRingHash, s.hash)
	}
	if diff := replicationDiff(st.Keyspaces, s.keyspaces); diff != "" {
		return tokenring.CleanupState{}, fmt.Errorf("%w: -state %s was planned under another replication (%s): "+
			"the nodes it records done may have lost ranges since and need a cleanup again; move it away to start a new campaign", errOtherRing, s.path, diff)
	}
	return tokenring.CleanupState{Done: slices.Clone(st.Done), Running: slices.Clone(st.Running)}, nil
}

// read returns the file's content, or nil when there is no file.
func (s fileStateStore) read() (*stateFile, error) {
	f, _, err := safefile.OpenRegular(safefile.Dir{}, s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("-state: %w", err)
	}
	defer f.Close()
	b, err := bounded.ReadAll(f, maxStateFile, "-state "+s.path)
	if err != nil {
		return nil, err
	}
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("-state %s: %w", s.path, err)
	}
	return &st, nil
}

// Save implements tokenring.CleanupStateStore.
func (s fileStateStore) Save(ctx context.Context, st tokenring.CleanupState) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(stateFile{TokenRingHash: s.hash, Keyspaces: s.keyspaces, Done: st.Done, Running: st.Running}, "", "  ")
	if err != nil {
		return err
	}
	return writeFileDurably(s.path, append(b, '\n'))
}

// writeFileDurably replaces path with data atomically and durably: a
// temporary file in the same directory (so the rename does not cross a
// filesystem), synced, renamed over path, and the directory synced so
// that the rename itself survives a crash.
func writeFileDurably(path string, data []byte) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, base+".tmp.*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// replicationDiff says how the replication a state was recorded under
// (was) differs from the one planned with now, or "" when they are the
// same: keyspaces added or gone, and each changed keyspace's settings.
func replicationDiff(was, now map[string]tokenring.Replication) string {
	if was == nil {
		return "the file records no replication"
	}
	var diffs []string
	for _, name := range slices.Sorted(maps.Keys(now)) {
		w, ok := was[name]
		switch {
		case !ok:
			diffs = append(diffs, "keyspace "+name+" is new")
		case !sameReplication(w, now[name]):
			diffs = append(diffs, fmt.Sprintf("keyspace %s was %s, now %s", name, replicationString(w), replicationString(now[name])))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(was)) {
		if _, ok := now[name]; !ok {
			diffs = append(diffs, "keyspace "+name+" is no longer planned")
		}
	}
	return strings.Join(diffs, "; ")
}

// sameReplication compares two replications as the ring reads them: a
// NetworkTopologyStrategy datacenter with factor 0 is one without
// replicas, listed or not.
func sameReplication(a, b tokenring.Replication) bool {
	if a.Strategy != b.Strategy || a.ReplicationFactor != b.ReplicationFactor {
		return false
	}
	for dc, rf := range a.Datacenters {
		if b.Datacenters[dc] != rf {
			return false
		}
	}
	for dc, rf := range b.Datacenters {
		if a.Datacenters[dc] != rf {
			return false
		}
	}
	return true
}

// replicationString spells a replication as the -keyspace flag takes it.
func replicationString(r tokenring.Replication) string {
	if len(r.Datacenters) == 0 {
		return fmt.Sprintf("%s:%d", r.Strategy, r.ReplicationFactor)
	}
	dcs := make([]string, 0, len(r.Datacenters))
	for _, dc := range slices.Sorted(maps.Keys(r.Datacenters)) {
		dcs = append(dcs, fmt.Sprintf("%s=%d", dc, r.Datacenters[dc]))
	}
	return fmt.Sprintf("%s:%s", r.Strategy, strings.Join(dcs, ","))
}
