package spdktest

import (
	"encoding/json"
	"slices"

	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// Answer carries out one call on the server's state without the socket,
// as a transport other than spdk_tgt's socket would deliver it (a host
// reaching SPDK through a process that owns the socket, such as
// Longhorn's instance-manager). The call is recorded like a request that
// came on the socket (Calls, CallCount). It returns the result as SPDK
// writes it, or SPDK's error as an *spdkrpc.RPCError whose Method is
// method. Faults apply to the socket only: Answer ignores them.
func (s *Server) Answer(method string, params json.RawMessage) (json.RawMessage, error) {
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: method, Params: slices.Clone(params)})
	s.mu.Unlock()
	result, rerr := s.dispatch(method, params)
	if rerr != nil {
		return nil, &spdkrpc.RPCError{Method: method, Code: rerr.code, Message: rerr.msg}
	}
	b, err := json.Marshal(result)
	if err != nil {
		return nil, &spdkrpc.RPCError{Method: method, Code: spdkrpc.CodeInternalError, Message: err.Error()}
	}
	return b, nil
}
