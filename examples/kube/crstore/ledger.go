package crstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/caretaker-storage/caretaker/orphan"
)

// The guard's ledger of automatic purges (see orphan.LedgerStore) is kept
// in one ConfigMap per node, in the Orphans' namespace, named
// LedgerName(node), the entries as JSON under data[LedgerKey]. A
// ConfigMap rather than an annotation on the Node: the agent needs no
// write access to Node objects (cluster-scoped, and written all the time
// by the kubelet, whose updates would conflict with the ledger's), only
// to ConfigMaps of its own namespace; and the ledger outlives a Node
// object deleted and registered again, which is when a view is most
// likely to be broken. Writes carry the resourceVersion read, so two
// agents of one node (a DaemonSet surge) share one allowance: the loser
// of a race gets orphan.ErrConflict, and its Sweeper reads the ledger
// again and decides again.
const (
	// LedgerPrefix starts the name of each ledger ConfigMap.
	LedgerPrefix = "caretaker-ledger-"
	// LedgerKey is the ConfigMap's data key holding the entries.
	LedgerKey = "autoPurges"
	// LabelLedgerNode labels a ledger ConfigMap with its node.
	LabelLedgerNode = "caretaker.io/ledger-node"
)

// ErrBadLedger is wrapped by the error of a ledger ConfigMap whose
// entries cannot be read. Nothing is purged automatically until a person
// repairs it or deletes the ConfigMap (which starts the budget afresh).
var ErrBadLedger = errors.New("crstore: unreadable ledger of automatic purges")

// ConfigMapGVR is the core ConfigMap resource.
var ConfigMapGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// LedgerName is the name of node's ledger ConfigMap: LedgerPrefix and
// the node's name, or for a name too long for an object, LedgerPrefix
// and a hash of it. An empty node (a Store for every node) is
// "caretaker-ledger".
func LedgerName(node string) string {
	if node == "" {
		return "caretaker-ledger"
	}
	if n := LedgerPrefix + node; len(n) <= 253 {
		return n
	}
	sum := sha256.Sum256([]byte(node))
	return LedgerPrefix + hex.EncodeToString(sum[:16])
}

// ledgerEntry is an orphan.AutoPurge as the ConfigMap holds it.
type ledgerEntry struct {
	Name       string    `json:"name"`
	Node       string    `json:"node"`
	Disk       string    `json:"disk,omitempty"`
	Kind       string    `json:"kind"`
	DataEngine string    `json:"dataEngine,omitempty"`
	At         time.Time `json:"at"`
}

// EncodeLedger is the ConfigMap data of a ledger.
func EncodeLedger(l []orphan.AutoPurge) (string, error) {
	es := make([]ledgerEntry, 0, len(l))
	for _, e := range l {
		es = append(es, ledgerEntry{Name: e.Name, Node: e.Scope.NodeID, Disk: e.Scope.Disk, Kind: string(e.Group.Kind),
			DataEngine: string(e.Group.DataEngine), At: e.At.UTC()})
	}
	b, err := json.Marshal(es)
	return string(b), err
}

// DecodeLedger reads the ConfigMap data EncodeLedger wrote; empty data is
// an empty ledger. An entry without a name, node, kind or time fails the
// whole ledger with ErrBadLedger: dropping it would count fewer purges
// than were made.
func DecodeLedger(data string) ([]orphan.AutoPurge, error) {
	if data == "" {
		return nil, nil
	}
	var es []ledgerEntry
	if err := json.Unmarshal([]byte(data), &es); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadLedger, err)
	}
	out := make([]orphan.AutoPurge, 0, len(es))
	for i, e := range es {
		if e.Name == "" || e.Node == "" || e.Kind == "" || e.At.IsZero() {
			return nil, fmt.Errorf("%w: entry %d (%+v) lacks a name, node, kind or time", ErrBadLedger, i, e)
		}
		out = append(out, orphan.AutoPurge{Name: e.Name, Scope: orphan.Scope{NodeID: e.Node, Disk: e.Disk},
			Group: orphan.Group{Kind: orphan.Kind(e.Kind), DataEngine: orphan.DataEngine(e.DataEngine)}, At: e.At})
	}
	return out, nil
}

var _ orphan.LedgerStore = (*Store)(nil)

// LoadAutoPurges implements orphan.LedgerStore: the ledger ConfigMap of
// the Store's OwnerID, read from the API server, and its resourceVersion.
func (s *Store) LoadAutoPurges(ctx context.Context) ([]orphan.AutoPurge, string, error) {
	name := LedgerName(s.opts.OwnerID)
	u, err := s.cm.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", s.wrap("get ledger", name, err)
	}
	data, _, _ := unstructured.NestedString(u.Object, "data", LedgerKey)
	l, err := DecodeLedger(data)
	if err != nil {
		return nil, "", fmt.Errorf("crstore: ConfigMap %s/%s: %w", s.opts.Namespace, name, err)
	}
	return l, u.GetResourceVersion(), nil
}

// SaveAutoPurges implements orphan.LedgerStore: it creates the ledger
// ConfigMap (version "") or updates it at version; if another writer
// came first, it returns an error wrapping orphan.ErrConflict.
func (s *Store) SaveAutoPurges(ctx context.Context, l []orphan.AutoPurge, version string) (string, error) {
	name := LedgerName(s.opts.OwnerID)
	data, err := EncodeLedger(l)
	if err != nil {
		return "", err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"data": map[string]any{LedgerKey: data}}}
	u.SetName(name)
	u.SetNamespace(s.opts.Namespace)
	if s.opts.OwnerID != "" {
		u.SetLabels(map[string]string{LabelLedgerNode: s.opts.OwnerID})
	}
	if version == "" {
		got, err := s.cm.Create(ctx, u, metav1.CreateOptions{FieldManager: s.opts.FieldManager})
		if apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("crstore: create ledger %s: another writer created it: %w: %w", name, orphan.ErrConflict, err)
		}
		if err != nil {
			return "", s.wrap("create ledger", name, err)
		}
		return got.GetResourceVersion(), nil
	}
	u.SetResourceVersion(version)
	got, err := s.cm.Update(ctx, u, metav1.UpdateOptions{FieldManager: s.opts.FieldManager})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("crstore: update ledger %s: deleted since it was read: %w: %w", name, orphan.ErrConflict, err)
	}
	if err != nil {
		return "", s.wrap("update ledger", name, err)
	}
	return got.GetResourceVersion(), nil
}
