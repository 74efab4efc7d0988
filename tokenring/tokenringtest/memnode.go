package tokenringtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/caretaker-storage/caretaker/tokenring"
)

// MemNode is an in-memory ScyllaDB node: it implements
// tokenring.RingSource, tokenring.LocationSource and tokenring.Cleaner over
// a Cluster, answering as ScyllaDB's REST API would, and records the
// cleanups it ran. Every call fails with ctx's error once ctx is done. A
// Server serves one in ScyllaDB's wire format. All methods are safe for
// concurrent use.
type MemNode struct {
	mu       sync.Mutex
	cluster  Cluster
	cleaned  []string
	stops    int
	failures map[string]error // by keyspace
}

var (
	_ tokenring.RingSource     = (*MemNode)(nil)
	_ tokenring.LocationSource = (*MemNode)(nil)
	_ tokenring.Cleaner        = (*MemNode)(nil)
)

// NewMemNode returns the node c.Local of cluster c. It keeps a copy of c.
func NewMemNode(c Cluster) *MemNode {
	return &MemNode{cluster: c.Clone(), failures: map[string]error{}}
}

// SetCluster replaces the cluster the node sees (a scale-out, a
// decommission, a dropped keyspace). It keeps a copy of c.
func (n *MemNode) SetCluster(c Cluster) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cluster = c.Clone()
}

// Update changes the cluster the node sees in place, under the node's lock:
// f must not keep c or call the node.
func (n *MemNode) Update(f func(c *Cluster)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f(&n.cluster)
	n.cluster = n.cluster.Clone() // f may have shared slices with its caller
}

// FailCleanup makes cleanups of keyspace return err (wrapped); nil removes
// the failure. A Server answers a *tokenring.APIError in err with its
// StatusCode and Message, and any other error with HTTP 500.
func (n *MemNode) FailCleanup(keyspace string, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err == nil {
		delete(n.failures, keyspace)
		return
	}
	n.failures[keyspace] = err
}

// Cleaned returns the keyspaces cleaned so far, in order.
func (n *MemNode) Cleaned() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.cleaned)
}

// StopCalls returns how many times StopCleanups was called successfully.
func (n *MemNode) StopCalls() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stops
}

// LocalHostID implements tokenring.RingSource. A node without a host ID
// yet answers tokenring.ErrNotFound, as ScyllaDB's API answers 404.
func (n *MemNode) LocalHostID(ctx context.Context) (string, error) {
	c, err := n.view(ctx)
	if err != nil {
		return "", err
	}
	local, ok := c.Node(c.Local)
	if !ok || local.HostID == "" {
		return "", fmt.Errorf("tokenringtest: local host ID is not yet set: %w", tokenring.ErrNotFound)
	}
	return local.HostID, nil
}

// HostIDs implements tokenring.RingSource.
func (n *MemNode) HostIDs(ctx context.Context) (map[string]string, error) {
	c, err := n.view(ctx)
	if err != nil {
		return nil, err
	}
	return c.HostIDs(), nil
}

// Tokens implements tokenring.RingSource: sorted numerically, as ScyllaDB
// reports them.
func (n *MemNode) Tokens(ctx context.Context) ([]string, error) {
	c, err := n.view(ctx)
	if err != nil {
		return nil, err
	}
	return c.Tokens(), nil
}

// EndpointTokens implements tokenring.RingSource. An endpoint the node does
// not know owns no tokens, as ScyllaDB answers.
func (n *MemNode) EndpointTokens(ctx context.Context, endpoint string) ([]string, error) {
	if endpoint == "" {
		return nil, errors.New("tokenringtest: EndpointTokens: empty endpoint")
	}
	c, err := n.view(ctx)
	if err != nil {
		return nil, err
	}
	node, _ := c.Node(endpoint)
	own := append([]string{}, node.Tokens...)
	slices.SortFunc(own, compareTokens)
	return own, nil
}

// TokenEndpoints implements tokenring.RingSource, ordered by token.
func (n *MemNode) TokenEndpoints(ctx context.Context) ([]tokenring.TokenEndpoint, error) {
	c, err := n.view(ctx)
	if err != nil {
		return nil, err
	}
	pairs := []tokenring.TokenEndpoint{}
	for _, node := range c.Nodes {
		for _, t := range node.Tokens {
			pairs = append(pairs, tokenring.TokenEndpoint{Token: t, Endpoint: node.Endpoint})
		}
	}
	slices.SortFunc(pairs, func(a, b tokenring.TokenEndpoint) int { return compareTokens(a.Token, b.Token) })
	return pairs, nil
}

// Location implements tokenring.LocationSource; an unknown endpoint is
// tokenring.ErrNotFound.
func (n *MemNode) Location(ctx context.Context, endpoint string) (tokenring.Location, error) {
	c, err := n.view(ctx)
	if err != nil {
		return tokenring.Location{}, err
	}
	node, ok := c.Node(endpoint)
	if !ok {
		return tokenring.Location{}, fmt.Errorf("tokenringtest: unknown host %s: %w", endpoint, tokenring.ErrNotFound)
	}
	return tokenring.Location{Datacenter: node.Datacenter, Rack: node.Rack}, nil
}

// StopCleanups implements tokenring.Cleaner. No cleanup ever runs in the
// background here, so it only counts the call.
func (n *MemNode) StopCleanups(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stops++
	return nil
}

// CleanupKeyspaces implements tokenring.Cleaner.
func (n *MemNode) CleanupKeyspaces(ctx context.Context) ([]string, error) {
	c, err := n.view(ctx)
	if err != nil {
		return nil, err
	}
	return c.CleanupKeyspaces(), nil
}

// CleanupKeyspace implements tokenring.Cleaner: it records the cleanup, or
// returns the failure set with FailCleanup, or tokenring.ErrKeyspaceNotFound
// for a keyspace that does not exist.
func (n *MemNode) CleanupKeyspace(ctx context.Context, keyspace string) error {
	if keyspace == "" {
		return errors.New("tokenringtest: CleanupKeyspace: empty keyspace")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.cluster.hasKeyspace(keyspace) {
		return fmt.Errorf("tokenringtest: keyspace %s does not exist: %w", keyspace, tokenring.ErrKeyspaceNotFound)
	}
	if err := n.failures[keyspace]; err != nil {
		return fmt.Errorf("tokenringtest: cleanup of %s: %w", keyspace, err)
	}
	n.cleaned = append(n.cleaned, keyspace)
	return nil
}

// NodeStates says which nodes are joining (a HostID and no Tokens),
// leaving, moving and down, each list sorted.
func (n *MemNode) NodeStates(ctx context.Context) (tokenring.NodeStates, error) {
	c, err := n.view(ctx)
	if err != nil {
		return tokenring.NodeStates{}, err
	}
	var st tokenring.NodeStates
	for _, node := range c.Nodes {
		if node.HostID != "" && len(node.Tokens) == 0 {
			st.Joining = append(st.Joining, node.Endpoint)
		}
		if node.Leaving {
			st.Leaving = append(st.Leaving, node.Endpoint)
		}
		if node.Moving {
			st.Moving = append(st.Moving, node.Endpoint)
		}
		if node.Down {
			st.Down = append(st.Down, node.Endpoint)
		}
	}
	for _, l := range [][]string{st.Joining, st.Leaving, st.Moving, st.Down} {
		slices.Sort(l)
	}
	return st, nil
}

// view returns a copy of the cluster, or ctx's error once ctx is done.
func (n *MemNode) view(ctx context.Context) (Cluster, error) {
	if err := ctx.Err(); err != nil {
		return Cluster{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cluster.Clone(), nil
}
