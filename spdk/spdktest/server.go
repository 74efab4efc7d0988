package spdktest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"
	"k8s.io/utils/clock"

	"github.com/caretaker-storage/caretaker/internal/clocks"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// Options configure a Server. The zero value is usable.
type Options struct {
	// NewUUID returns the UUID of each object created. Nil means a
	// deterministic sequence (name-based UUIDs of a counter), so test and
	// example output is stable.
	NewUUID func() string
	// Clock times Fault.Delay and stamps each new lvol's creation_time.
	// Nil means the real clock; a fake clock holds delayed replies until
	// the test steps it.
	Clock clock.Clock
}

// Server is the fake SPDK target.
type Server struct {
	path    string
	ln      net.Listener
	newUUID func() string
	clock   clock.Clock

	mu       sync.Mutex
	lvstores []*lvstore
	lvols    []*lvol // creation order
	raids    []*raid
	calls    []Call
	faults   []*Fault
	conns    map[net.Conn]struct{}
	closed   bool
	seq      uint64

	// NVMe-oF state (nvmf.go): subsystems in creation order, the
	// discovery subsystem first, and NVMe bdev controllers.
	subsystems []*subsystem
	ctrlrs     []*nvmeCtrlr
	seqCntlid  uint16 // the last controller ID a remote target gave

	wg   sync.WaitGroup
	done chan struct{}
}

// Call is one request the server received.
type Call struct {
	Method string
	Params json.RawMessage
}

// Start listens on socketPath and serves until Close. A stale socket at
// that path is replaced; any other file there is an error.
func Start(socketPath string, opts Options) (*Server, error) {
	// Remove a socket left by a crashed run, but never anything else.
	if fi, err := os.Lstat(socketPath); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("spdktest: %s exists and is not a socket", socketPath)
		}
		if err := os.Remove(socketPath); err != nil {
			return nil, fmt.Errorf("spdktest: removing stale socket: %w", err)
		}
	}
	ln, err := net.Listen("unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("spdktest: %w", err)
	}
	s := &Server{path: socketPath, ln: ln, newUUID: opts.NewUUID, clock: clocks.Or(opts.Clock), conns: make(map[net.Conn]struct{}), done: make(chan struct{})}
	if s.newUUID == nil {
		s.newUUID = s.sequentialUUID
	}
	s.subsystems = []*subsystem{newDiscoverySubsystem()}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// SocketPath returns the socket the server listens on.
func (s *Server) SocketPath() string { return s.path }

// Close stops listening, closes every connection, waits for every handler
// to finish and removes the socket file.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	err := s.ln.Close()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	_ = os.Remove(s.path)
	return err
}

// DropConnections closes every open connection, as an SPDK restart would.
func (s *Server) DropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.Close()
	}
}

// Calls returns the requests received so far, in arrival order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// ResetCalls forgets the requests received so far.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// CallCount returns how many requests for method were received.
func (s *Server) CallCount(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.Method == method {
			n++
		}
	}
	return n
}

func (s *Server) sequentialUUID() string {
	s.seq++
	return uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "spdktest-%d", s.seq)).String()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// serve reads requests from one connection and answers each from its own
// goroutine.
func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	var handlers sync.WaitGroup
	defer func() {
		_ = c.Close()
		handlers.Wait()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	w := &connWriter{c: c}
	dec := json.NewDecoder(c)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			var syn *json.SyntaxError
			if errors.As(err, &syn) {
				// SPDK answers unparsable input with a null id and drops
				// the connection: it cannot find the next request.
				w.write(errorReply(nil, spdkrpc.CodeParseError, "Parse error"))
			}
			return
		}
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			s.handle(w, raw)
		}()
	}
}

type connWriter struct {
	mu sync.Mutex
	c  net.Conn
}

func (w *connWriter) write(b []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.c.Write(b)
}

func (w *connWriter) close() { _ = w.c.Close() }

type rpcRequest struct {
	Version string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	ID      json.RawMessage `json:"id"`
	Params  json.RawMessage `json:"params"`
}

// rpcError is an error a method handler returns.
type rpcError struct {
	code int
	msg  string
}

func (e *rpcError) Error() string { return e.msg }

func errNoDevice() *rpcError { return &rpcError{spdkrpc.CodeNoSuchDevice, "No such device"} }

func (s *Server) handle(w *connWriter, raw json.RawMessage) {
	var req rpcRequest
	if err := json.Unmarshal(raw, &req); err != nil || req.Version != "2.0" || req.Method == "" || !paramsShaped(req.Params) {
		w.write(errorReply(req.ID, spdkrpc.CodeInvalidRequest, "Invalid request"))
		return
	}
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: req.Method, Params: slices.Clone(req.Params)})
	f := s.matchFault(req.Method, req.Params)
	s.mu.Unlock()

	if f != nil && f.Delay > 0 {
		select {
		case <-s.clock.After(f.Delay):
		case <-s.done:
			return
		}
	}
	var body []byte
	result, rerr := s.dispatch(req.Method, req.Params)
	if rerr != nil {
		body = errorReply(req.ID, rerr.code, rerr.msg)
	} else {
		body = resultReply(req.ID, result)
	}
	// Then runs before the reply leaves, so the caller cannot act on the
	// reply before the state has changed under it.
	s.runThen(f)
	switch {
	case f == nil || f.Action == None:
		w.write(body)
	case f.Action == Drop:
		w.close()
	case f.Action == Garbage:
		w.write([]byte("}{ this is not json\n"))
	case f.Action == Truncate:
		w.write(body[:len(body)/2])
		w.close()
	case f.Action == Replace:
		w.write(rawResultReply(req.ID, f.Result))
	}
}

// rawResultReply is a reply whose result is raw as given (null if empty).
// An invalid raw value would garble the stream, which Garbage is for; it
// is sent as null instead.
func rawResultReply(id json.RawMessage, raw json.RawMessage) []byte {
	if len(bytes.TrimSpace(raw)) == 0 || !json.Valid(raw) {
		raw = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		Version string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", idOrNull(id), raw})
	return append(b, '\n')
}

func (s *Server) runThen(f *Fault) {
	if f != nil && f.Then != nil {
		f.Then()
	}
}

func resultReply(id json.RawMessage, result any) []byte {
	b, err := json.Marshal(struct {
		Version string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", idOrNull(id), result})
	if err != nil {
		return errorReply(id, spdkrpc.CodeInternalError, err.Error())
	}
	return append(b, '\n')
}

func errorReply(id json.RawMessage, code int, msg string) []byte {
	type rpcErr struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		Version string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcErr          `json:"error"`
	}{"2.0", idOrNull(id), rpcErr{code, msg}})
	return append(b, '\n')
}

func idOrNull(id json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(id)) == 0 {
		return json.RawMessage("null")
	}
	return id
}

// hasParams reports whether a request carries params; null is as if it
// did not (parse_single_request).
func hasParams(params json.RawMessage) bool {
	p := strings.TrimSpace(string(params))
	return p != "" && p != "null"
}

// paramsShaped reports whether params are absent, null, an object or an
// array: SPDK answers anything else -32600 before any handler runs
// (parse_single_request in lib/jsonrpc/jsonrpc_server.c).
func paramsShaped(params json.RawMessage) bool {
	p := bytes.TrimSpace(params)
	return !hasParams(params) || p[0] == '{' || p[0] == '['
}
