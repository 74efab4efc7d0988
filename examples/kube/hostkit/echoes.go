package hostkit

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Echoes tells a host's own writes to its records, coming back through
// its watch, from everyone else's changes. An echo changes nothing the
// Sweeper has not already seen, so it should not start a sweep; every
// other event should (a user's deletion request, a label a person sets,
// another writer's change).
//
// A write is known by the resourceVersion the API server answered it with,
// a deletion by the object's name. A host that can bracket each write
// calls Begin before it and End after it: a watch event that arrives while
// a write of the object is in flight (the watch often beats the write's
// answer) is held, and once the write has returned, wakes the host only if
// it was not the write's. A host that learns of its writes only after the
// fact (crstore's Options.OnWrite) calls Wrote; an event that beats the
// report then wakes the host once more, which costs a sweep that finds
// nothing to do.
//
// A nil *Echoes knows no writes: every event is someone else's. Echoes is
// safe for concurrent use.
type Echoes struct {
	wake func()

	mu       sync.Mutex
	written  map[string][]string        // name → resourceVersions of the last writes
	unseen   map[string]map[string]bool // name → resourceVersions written, not seen through the watch yet
	inFlight map[string]int             // name → writes not answered yet
	held     map[string][]string        // name → resourceVersions of events held meanwhile
	deleted  map[string]bool            // names the host is deleting
}

// keepWritten is how many of an object's last writes are remembered: a
// Store call makes at most three in a row.
const keepWritten = 4

// NewEchoes returns an empty set of writes. wake is called, outside any
// lock, when an event held during a write turns out not to be the write's;
// nil means the host wakes some other way.
func NewEchoes(wake func()) *Echoes {
	return &Echoes{wake: wake, written: map[string][]string{}, unseen: map[string]map[string]bool{},
		inFlight: map[string]int{}, held: map[string][]string{}, deleted: map[string]bool{}}
}

// Begin notes a write of the object name about to be sent.
func (e *Echoes) Begin(name string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inFlight[name]++
}

// End notes the answer to a write Begin noted: resourceVersion is the
// object's as the API server returned it, if err is nil. When no write of
// the name is left in flight, an event held meanwhile that was not the
// write's wakes the host.
func (e *Echoes) End(name, resourceVersion string, err error) {
	if e == nil {
		return
	}
	e.mu.Lock()
	if err == nil && resourceVersion != "" {
		e.noteLocked(name, resourceVersion)
	}
	e.inFlight[name]--
	wake := false
	if e.inFlight[name] <= 0 {
		delete(e.inFlight, name)
		for _, rv := range e.held[name] {
			if !e.seenLocked(name, rv) {
				wake = true
			}
		}
		delete(e.held, name)
	}
	e.mu.Unlock()
	if wake && e.wake != nil {
		e.wake()
	}
}

// Wrote notes a write already answered: the object name is now at
// resourceVersion.
func (e *Echoes) Wrote(name, resourceVersion string) {
	e.Begin(name)
	e.End(name, resourceVersion, nil)
}

func (e *Echoes) noteLocked(name, rv string) {
	w := append(e.written[name], rv)
	e.written[name] = w[max(0, len(w)-keepWritten):]
	if e.unseen[name] == nil {
		e.unseen[name] = map[string]bool{}
	}
	e.unseen[name][rv] = true
}

// seenLocked reports whether rv is one of the last writes of name and,
// if so, notes it seen through the watch, with every write of name made
// before it: the watch shows an object's versions in order, so those will
// not come back after it.
func (e *Echoes) seenLocked(name, rv string) bool {
	i := slices.Index(e.written[name], rv)
	if i < 0 {
		return false
	}
	for _, w := range e.written[name][:i+1] {
		delete(e.unseen[name], w)
	}
	if len(e.unseen[name]) == 0 {
		delete(e.unseen, name)
	}
	return true
}

// Echo reports whether an event showing the object name at
// resourceVersion (a creation or an update) need not wake the host: it is
// the result of one of the host's last writes of the object, or a write of
// it is in flight (the event is then held; see End). Any other version is
// someone else's, and the host's writes before it will not come back.
func (e *Echoes) Echo(name, resourceVersion string) bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.seenLocked(name, resourceVersion) {
		return true
	}
	if e.inFlight[name] > 0 {
		e.held[name] = append(e.held[name], resourceVersion)
		return true
	}
	delete(e.unseen, name)
	return false
}

// Deleting marks (on) or unmarks the object name as being deleted by the
// host. Mark it before the delete call: the deletion's event may come
// before the call's answer.
func (e *Echoes) Deleting(name string, on bool) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if on {
		e.deleted[name] = true
	} else {
		delete(e.deleted, name)
	}
}

// DeletedByUs reports whether the host is deleting the object name: an
// update that sets its deletion timestamp is then the host's own echo.
func (e *Echoes) DeletedByUs(name string) bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.deleted[name]
}

// Gone reports whether the deletion of the object name (its watch's
// delete event) was the host's own, and forgets the object.
func (e *Echoes) Gone(name string) bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ours := e.deleted[name]
	delete(e.deleted, name)
	delete(e.written, name)
	delete(e.unseen, name)
	return ours
}

// Pending is the number of objects with a write or a deletion the host
// made that has not come back through its watch yet.
func (e *Echoes) Pending() int {
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	n := len(e.deleted)
	for name := range e.unseen {
		if !e.deleted[name] {
			n++
		}
	}
	return n
}

// Settle waits until every write and deletion the host made has come back
// through its watch (Pending is 0), at most max or until ctx is done. A
// host that plans from its watch's cache calls it before a sweep that
// follows a batch of its own writes, so the sweep sees them.
func (e *Echoes) Settle(ctx context.Context, max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) && ctx.Err() == nil && e.Pending() > 0 {
		time.Sleep(10 * time.Millisecond) // polling the host's own bookkeeping, bounded by max
	}
}
