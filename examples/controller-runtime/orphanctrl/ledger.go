package orphanctrl

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/orphan"
)

var _ orphan.LedgerStore = (*Store)(nil)

// LoadAutoPurges implements orphan.LedgerStore with crstore's layout: the
// guard's ledger of automatic purges is the ConfigMap
// crstore.LedgerName(ownerID) in the Store's namespace, read through
// APIReader (uncached: a stale ledger would only conflict, and a cache
// of ConfigMaps would watch every one of the cluster's).
func (s *Store) LoadAutoPurges(ctx context.Context) ([]orphan.AutoPurge, string, error) {
	var cm corev1.ConfigMap
	name := crstore.LedgerName(s.ownerID)
	err := s.api.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, &cm)
	if apierrors.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", wrap("get ledger", name, err)
	}
	l, err := crstore.DecodeLedger(cm.Data[crstore.LedgerKey])
	if err != nil {
		return nil, "", fmt.Errorf("orphanctrl: ConfigMap %s/%s: %w", s.namespace, name, err)
	}
	return l, cm.ResourceVersion, nil
}

// SaveAutoPurges implements orphan.LedgerStore: it creates the ledger
// ConfigMap (version "") or updates it at version; if another writer
// came first, it returns an error wrapping orphan.ErrConflict.
func (s *Store) SaveAutoPurges(ctx context.Context, l []orphan.AutoPurge, version string) (string, error) {
	name := crstore.LedgerName(s.ownerID)
	data, err := crstore.EncodeLedger(l)
	if err != nil {
		return "", err
	}
	cm := &corev1.ConfigMap{Data: map[string]string{crstore.LedgerKey: data}}
	cm.Name, cm.Namespace, cm.ResourceVersion = name, s.namespace, version
	if s.ownerID != "" {
		cm.Labels = map[string]string{crstore.LabelLedgerNode: s.ownerID}
	}
	w := s.c
	if ec, ok := w.(echoClient); ok {
		w = ec.Client // the echo filter knows Orphans only
	}
	if version == "" {
		err = w.Create(ctx, cm)
	} else {
		err = w.Update(ctx, cm)
	}
	switch {
	case err == nil:
		return cm.ResourceVersion, nil
	case apierrors.IsAlreadyExists(err), apierrors.IsNotFound(err):
		return "", fmt.Errorf("orphanctrl: save ledger %s: another writer came first: %w: %w", name, orphan.ErrConflict, err)
	}
	return "", wrap("save ledger", name, err)
}
