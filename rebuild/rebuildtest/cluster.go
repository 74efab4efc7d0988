// Package rebuildtest provides an in-memory cluster that implements
// rebuild.VolumeSource and rebuild.TicketStore, with a small attachment
// controller and volume controller, and a Sim that drives it together with
// a rebuild.Driver on a fake clock. Tests, examples and hosts' own tests use
// it to watch offline rebuilding happen without Kubernetes.
//
// RunVolumeSourceTests and RunTicketStoreTests are conformance suites for
// the host interfaces: a host runs them against its own implementations in
// one line each, and the Cluster passes both.
package rebuildtest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/caretaker-storage/caretaker/rebuild"
)

// Workload ticket priorities, Longhorn's levels.
const (
	PriorityCSI = 900  // csi-attacher: a pod using the volume
	PriorityAPI = 1000 // longhorn-api: a user attaching by hand
)

// Cluster is an in-memory storage cluster: volumes with replicas, their
// attachment tickets, and the global setting. Its controllers move only
// when Step is called, one transition per volume per step, so a test sees
// every intermediate state. All methods are safe for concurrent use.
type Cluster struct {
	clock   clock.PassiveClock // stamps replica failures; nil leaves them zero
	mu      sync.Mutex
	global  string
	volumes map[string]*volume

	// RebuildSteps is how many Steps a replica rebuild takes. Zero means 3.
	RebuildSteps int
	// OnlineRebuild lets replicas rebuild while attached for a workload.
	// False models the v2 engine of seed 003: rebuilding only happens in
	// maintenance mode.
	OnlineRebuild bool
}

// VolumeSpec describes a volume to create.
type VolumeSpec struct {
	Name       string
	OwnerNode  string
	DataEngine rebuild.DataEngine    // "" means v2
	Replicas   int                   // desired replicas; 0 means 3
	Setting    rebuild.VolumeSetting // "" means ignored
}

type volume struct {
	spec        VolumeSpec
	replicas    []*replica
	nextReplica int
	state       rebuild.AttachState
	attachedFor string // ID of the ticket the volume is (being) attached for
	maintenance bool
	deleting    bool
	unscheduled bool // no disk takes a new replica, no failed replica is reusable
	failRebuild bool // every rebuild ends failed
	hangRebuild bool // rebuilds stay rebuilding and make no progress
	tickets     map[string]rebuild.Ticket
	status      rebuild.Status
}

type replica struct {
	name     string
	state    rebuild.ReplicaState
	progress int
	failedAt time.Time
}

// NewCluster returns an empty cluster with the global setting "enabled".
// clk stamps replica failures (Replica.LastFailedAt); nil leaves them zero,
// like a host that does not report failure times.
func NewCluster(clk clock.PassiveClock) *Cluster {
	return &Cluster{clock: clk, global: "enabled", volumes: map[string]*volume{}}
}

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
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.volumes[name]
	if !ok {
		return fmt.Errorf("volume %s: %w", name, rebuild.ErrNotFound)
	}
	conds := []metav1.Condition{}
	if v.status.Condition.Type != "" {
		conds = append(conds, v.status.Condition)
	}
	meta.SetStatusCondition(&conds, st.Condition)
	v.status = rebuild.Status{Required: st.Required, Condition: *meta.FindStatusCondition(conds, st.Condition.Type)}
	return nil
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
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.volumes[name]
	if !ok {
		return fmt.Errorf("volume %s: %w", name, rebuild.ErrNotFound)
	}
	v.tickets[t.ID] = t
	return nil
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

// CreateVolume adds a detached volume whose replicas are all healthy.
func (c *Cluster) CreateVolume(spec VolumeSpec) error {
	if spec.DataEngine == "" {
		spec.DataEngine = rebuild.DataEngineV2
	}
	if spec.Replicas == 0 {
		spec.Replicas = 3
	}
	if spec.Setting == "" {
		spec.Setting = rebuild.VolumeSettingIgnored
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.volumes[spec.Name]; ok {
		return fmt.Errorf("volume %s already exists", spec.Name)
	}
	v := &volume{spec: spec, state: rebuild.StateDetached, tickets: map[string]rebuild.Ticket{}}
	for i := 0; i < spec.Replicas; i++ {
		v.addReplica(rebuild.ReplicaHealthy)
	}
	c.volumes[spec.Name] = v
	return nil
}

// Attach adds a workload ticket (a pod's CSI attachment, or a user's).
func (c *Cluster) Attach(name, ticketID, node string, priority int) error {
	return c.with(name, func(v *volume) error {
		v.tickets[ticketID] = rebuild.Ticket{ID: ticketID, Type: "csi-attacher", NodeID: node, Priority: priority}
		return nil
	})
}

// Detach removes a ticket.
func (c *Cluster) Detach(name, ticketID string) error {
	return c.with(name, func(v *volume) error { delete(v.tickets, ticketID); return nil })
}

// LoseReplica fails one healthy replica (its node lost power, say).
func (c *Cluster) LoseReplica(name string) error {
	return c.with(name, func(v *volume) error {
		for _, r := range v.replicas {
			if r.state == rebuild.ReplicaHealthy {
				r.state, r.failedAt = rebuild.ReplicaFailed, c.now()
				return nil
			}
		}
		return fmt.Errorf("volume %s has no healthy replica to lose", name)
	})
}

// RecoverReplica makes one failed replica healthy again without a rebuild
// (its node came back with its data intact).
func (c *Cluster) RecoverReplica(name string) error {
	return c.with(name, func(v *volume) error {
		for _, r := range v.replicas {
			if r.state == rebuild.ReplicaFailed {
				r.state = rebuild.ReplicaHealthy
				return nil
			}
		}
		return fmt.Errorf("volume %s has no failed replica", name)
	})
}

// SetSchedulable says whether replicas can be scheduled or reused.
func (c *Cluster) SetSchedulable(name string, ok bool) error {
	return c.with(name, func(v *volume) error { v.unscheduled = !ok; return nil })
}

// SetFailRebuilds makes every rebuild of the volume fail (or succeed again).
func (c *Cluster) SetFailRebuilds(name string, fail bool) error {
	return c.with(name, func(v *volume) error { v.failRebuild = fail; return nil })
}

// SetHangRebuilds makes the volume's rebuilds hang (or resume): a hung
// replica stays rebuilding and its RebuildProgress does not move, as when
// the engine waits forever on a peer.
func (c *Cluster) SetHangRebuilds(name string, hang bool) error {
	return c.with(name, func(v *volume) error { v.hangRebuild = hang; return nil })
}

// SetVolumeSetting changes the volume's own offline rebuilding setting.
func (c *Cluster) SetVolumeSetting(name string, s rebuild.VolumeSetting) error {
	return c.with(name, func(v *volume) error { v.spec.Setting = s; return nil })
}

// SetGlobalSetting changes the raw value of the global setting.
func (c *Cluster) SetGlobalSetting(value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.global = value
}

// DeleteVolume requests deletion. The attachment controller detaches the
// volume, and it disappears with its tickets once detached.
func (c *Cluster) DeleteVolume(name string) error {
	return c.with(name, func(v *volume) error { v.deleting = true; return nil })
}

// VolumeState is a snapshot of one volume for assertions and timelines.
type VolumeState struct {
	Exists      bool
	State       rebuild.AttachState
	AttachedFor string // ticket the volume is attached (or attaching) for
	Maintenance bool   // attached with the frontend disabled
	Healthy     int
	Rebuilding  int
	Progress    int64 // sum of RebuildProgress over rebuilding replicas, as the view reports it
	Desired     int
	Tickets     []rebuild.Ticket
	Status      rebuild.Status
}

// Inspect returns a snapshot of the volume; Exists is false once it is gone.
func (c *Cluster) Inspect(name string) VolumeState {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.volumes[name]
	if !ok {
		return VolumeState{}
	}
	st := VolumeState{Exists: true, State: v.state, AttachedFor: v.attachedFor, Maintenance: v.maintenance,
		Desired: v.spec.Replicas, Tickets: v.sortedTickets(), Status: v.status}
	for _, r := range v.replicas {
		switch r.state {
		case rebuild.ReplicaHealthy:
			st.Healthy++
		case rebuild.ReplicaRebuilding:
			st.Rebuilding++
			st.Progress += int64(r.progress * 100 / c.rebuildSteps())
		}
	}
	return st
}

// Names returns the names of all volumes, sorted.
func (c *Cluster) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(c.volumes))
	for n := range c.volumes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Step moves every volume's controllers one transition: the attachment
// controller first (attach for the highest-priority ticket, detach when no
// ticket wants the volume), then the volume controller (rebuild replicas
// while attached), then removal of a deleting volume that is detached.
func (c *Cluster) Step() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, v := range c.volumes {
		c.stepAttachment(v)
		c.stepReplicas(v)
		if v.deleting && v.state == rebuild.StateDetached {
			delete(c.volumes, name)
		}
	}
}

// stepAttachment is the attachment controller: the volume serves the ticket
// with the highest priority (among equals the one it serves already, then
// the smaller ID), switching only through a detach.
func (c *Cluster) stepAttachment(v *volume) {
	best, ok := v.bestTicket()
	if v.deleting {
		ok = false // a volume being deleted is detached, whoever asks
	}
	switch v.state {
	case rebuild.StateDetached:
		if ok {
			v.state, v.attachedFor, v.maintenance = rebuild.StateAttaching, best.ID, best.DisableFrontend
		}
	case rebuild.StateAttaching:
		if !ok || best.ID != v.attachedFor {
			v.state, v.attachedFor, v.maintenance = rebuild.StateDetached, "", false
			return
		}
		v.state = rebuild.StateAttached
	case rebuild.StateAttached:
		if !ok || best.ID != v.attachedFor {
			v.state = rebuild.StateDetaching
			v.stopRebuilds(c.now())
		}
	default: // detaching
		v.state, v.attachedFor, v.maintenance = rebuild.StateDetached, "", false
	}
}

// stepReplicas is the volume controller's rebuilding.
func (c *Cluster) stepReplicas(v *volume) {
	if v.state != rebuild.StateAttached || !(v.maintenance || c.OnlineRebuild) {
		return
	}
	steps := c.rebuildSteps()
	rebuilding := false
	for _, r := range v.replicas {
		if r.state != rebuild.ReplicaRebuilding {
			continue
		}
		if v.hangRebuild {
			rebuilding = true
			continue
		}
		r.progress++
		if r.progress < steps {
			rebuilding = true
			continue
		}
		r.state, r.progress = rebuild.ReplicaHealthy, 0
		if v.failRebuild {
			r.state, r.failedAt = rebuild.ReplicaFailed, c.now()
		}
	}
	if rebuilding || v.unscheduled || v.healthy() >= v.spec.Replicas || v.healthy() == 0 {
		return
	}
	for _, r := range v.replicas {
		if r.state == rebuild.ReplicaFailed { // reuse before adding
			r.state = rebuild.ReplicaRebuilding
			return
		}
	}
	v.addReplica(rebuild.ReplicaRebuilding)
}

// rebuildSteps is RebuildSteps with its default.
func (c *Cluster) rebuildSteps() int {
	if c.RebuildSteps <= 0 {
		return 3
	}
	return c.RebuildSteps
}

func (c *Cluster) now() time.Time {
	if c.clock == nil {
		return time.Time{}
	}
	return c.clock.Now()
}

func (c *Cluster) with(name string, f func(*volume) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.volumes[name]
	if !ok {
		return fmt.Errorf("volume %s: %w", name, rebuild.ErrNotFound)
	}
	return f(v)
}

func (v *volume) addReplica(s rebuild.ReplicaState) {
	v.replicas = append(v.replicas, &replica{name: fmt.Sprintf("%s-r-%d", v.spec.Name, v.nextReplica), state: s})
	v.nextReplica++
}

// stopRebuilds ends every running rebuild: a detach interrupts it.
func (v *volume) stopRebuilds(now time.Time) {
	for _, r := range v.replicas {
		if r.state == rebuild.ReplicaRebuilding {
			r.state, r.progress, r.failedAt = rebuild.ReplicaFailed, 0, now
		}
	}
}

func (v *volume) healthy() int {
	n := 0
	for _, r := range v.replicas {
		if r.state == rebuild.ReplicaHealthy {
			n++
		}
	}
	return n
}

func (v *volume) robustness() rebuild.Robustness {
	switch h := v.healthy(); {
	case h == 0:
		return rebuild.RobustnessFaulted
	case h < v.spec.Replicas:
		return rebuild.RobustnessDegraded
	}
	return rebuild.RobustnessHealthy
}

func (v *volume) bestTicket() (rebuild.Ticket, bool) {
	ts := v.sortedTickets()
	if len(ts) == 0 {
		return rebuild.Ticket{}, false
	}
	best := ts[0]
	for _, t := range ts[1:] {
		// Among equals the ticket already served keeps the volume, so that
		// equal priorities never take it from each other.
		if t.Priority > best.Priority || t.Priority == best.Priority && t.ID == v.attachedFor {
			best = t
		}
	}
	return best, true
}

func (v *volume) sortedTickets() []rebuild.Ticket {
	ts := make([]rebuild.Ticket, 0, len(v.tickets))
	for _, t := range v.tickets {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].ID < ts[j].ID })
	return ts
}
