package rebuildtest

import (
	"fmt"
	"sort"
	"time"

	"github.com/caretaker-storage/caretaker/rebuild"
)

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
