package spdktest

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"
)

// FaultAction is what a fault does to a reply.
type FaultAction int

// The fault actions. In every case the method itself is carried out: the
// fault hits the reply, as when SPDK did the work and the answer was lost.
const (
	None     FaultAction = iota // reply normally (after Delay)
	Garbage                     // reply with bytes that are not JSON
	Truncate                    // send half the reply, then close the connection
	Drop                        // close the connection without replying
	// Replace answers with a well-formed JSON-RPC reply whose result is
	// Fault.Result exactly as given (nil means null): a wrong-shaped
	// result, as a broken or foreign SPDK might send.
	Replace
)

// Fault changes how the server answers matching calls.
type Fault struct {
	// Method the fault applies to; "" matches every method.
	Method string
	// Params, when set, limits the fault to calls whose params are this
	// JSON value (compared after compaction); "null" matches a call
	// without params. Nil matches any params.
	Params json.RawMessage
	// Delay before the reply is sent.
	Delay time.Duration
	// Action taken on the reply.
	Action FaultAction
	// Result is the raw JSON result a Replace reply carries; nil means
	// null. It is sent as given, so it may be any JSON value (an object
	// where a list belongs, a list of numbers, a list with a null).
	Result json.RawMessage
	// Times is how many matching calls the fault applies to; 0 means once,
	// a negative value means every call until ClearFaults.
	Times int
	// Then, if set, runs for each matching call after the method was
	// carried out and before its reply is sent: use it to change state
	// between two calls, e.g. RecreateLvol after a listing. It must not
	// block on the caller.
	Then func()
}

// Inject adds a fault. Faults are matched in the order they were added.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Times == 0 {
		f.Times = 1
	}
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// matchFault returns the fault for method and params and uses it up.
// Called with mu held.
func (s *Server) matchFault(method string, params json.RawMessage) *Fault {
	for i, f := range s.faults {
		if f.Method != "" && f.Method != method {
			continue
		}
		if f.Params != nil && compact(f.Params) != compact(params) {
			continue
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				s.faults = slices.Delete(s.faults, i, i+1)
			}
		}
		return f
	}
	return nil
}

// compact returns v without insignificant space, and "null" for nothing.
func compact(v json.RawMessage) string {
	var b bytes.Buffer
	if len(bytes.TrimSpace(v)) == 0 || json.Compact(&b, v) != nil {
		return "null"
	}
	return b.String()
}
