package rebuildtest

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/caretaker-storage/caretaker/internal/clocks"
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
	clock   clock.Clock // stamps replica failures
	mu      sync.Mutex
	global  string
	volumes map[string]*volume

	// RebuildSteps is how many Steps a replica rebuild takes. Zero means 3.
	RebuildSteps int
	// OnlineRebuild lets replicas rebuild while attached for a workload.
	// False models the v2 engine of longhorn/longhorn#6071: rebuilding only happens in
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

// ClusterOptions configure NewCluster; the zero value is a cluster on the
// real clock.
type ClusterOptions struct {
	// Clock stamps replica failures (Replica.LastFailedAt); nil means the
	// real clock. A Sim passes its fake clock.
	Clock clock.Clock
}

// NewCluster returns an empty cluster with the global setting "enabled".
func NewCluster(opts ClusterOptions) *Cluster {
	return &Cluster{clock: clocks.Or(opts.Clock), global: "enabled", volumes: map[string]*volume{}}
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

func (c *Cluster) rebuildSteps() int {
	if c.RebuildSteps <= 0 {
		return 3
	}
	return c.RebuildSteps
}

func (c *Cluster) now() time.Time { return c.clock.Now() }

func (c *Cluster) with(name string, f func(*volume) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.volumes[name]
	if !ok {
		return fmt.Errorf("volume %s: %w", name, rebuild.ErrNotFound)
	}
	return f(v)
}
