package rebuildtest

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/rebuild"
)

var _ rebuild.VolumeSource = (*Cluster)(nil)
var _ rebuild.TicketStore = (*Cluster)(nil)

// Volume implements rebuild.VolumeSource.
func (c *Cluster) Volume(_ context.Context, name string) (rebuild.Volume, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.volumes[name]
	if !ok {
		return rebuild.Volume{}, fmt.Errorf("volume %s: %w", name, rebuild.ErrNotFound)
	}
	view := rebuild.Volume{
		Name: name, OwnerNode: v.spec.OwnerNode, DataEngine: v.spec.DataEngine, Setting: v.spec.Setting,
		State: v.state, Robustness: v.robustness(), Deleting: v.deleting, DesiredReplicas: v.spec.Replicas,
		CanScheduleReplica: !v.unscheduled,
	}
	for _, r := range v.replicas {
		view.Replicas = append(view.Replicas, rebuild.Replica{Name: r.name, State: r.state, LastFailedAt: r.failedAt,
			RebuildProgress: int64(r.progress * 100 / c.rebuildSteps())})
		if r.state == rebuild.ReplicaFailed && !v.unscheduled {
			view.CanReuseFailedReplica = true
		}
	}
	return view, nil
}

// GlobalSetting implements rebuild.VolumeSource.
func (c *Cluster) GlobalSetting(context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.global, nil
}

// UpdateStatus implements rebuild.VolumeSource. The condition is merged
// with meta.SetStatusCondition, as the contract asks: its
// LastTransitionTime moves only when its Status changes.
func (c *Cluster) UpdateStatus(_ context.Context, name string, st rebuild.Status) error {
	return c.with(name, func(v *volume) error {
		conds := []metav1.Condition{}
		if v.status.Condition.Type != "" {
			conds = append(conds, v.status.Condition)
		}
		meta.SetStatusCondition(&conds, st.Condition)
		v.status = rebuild.Status{Required: st.Required, Condition: *meta.FindStatusCondition(conds, st.Condition.Type)}
		return nil
	})
}

// Tickets implements rebuild.TicketStore, sorted by ID.
func (c *Cluster) Tickets(_ context.Context, name string) ([]rebuild.Ticket, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.volumes[name]
	if !ok {
		return nil, nil
	}
	return v.sortedTickets(), nil
}

// PutTicket implements rebuild.TicketStore.
func (c *Cluster) PutTicket(_ context.Context, name string, t rebuild.Ticket) error {
	return c.with(name, func(v *volume) error { v.tickets[t.ID] = t; return nil })
}

// DeleteTicket implements rebuild.TicketStore; deleting what is gone is success.
func (c *Cluster) DeleteTicket(_ context.Context, name, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.volumes[name]; ok {
		delete(v.tickets, id)
	}
	return nil
}
