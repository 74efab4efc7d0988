// Package spdkrpc speaks SPDK's JSON-RPC 2.0 over its Unix socket: the
// connection (Client), the contract any connection fulfils (Caller), the
// typed calls caretaker makes and the wire types of their replies. It
// knows SPDK's wire format and nothing of Longhorn or of orphans: package
// spdk builds the v2 orphan adapter on it.
//
// # In short
//
//	client, err := spdkrpc.NewClient(spdkrpc.ClientOptions{}) // DefaultSocketPath
//	if err != nil { return err } // an option it cannot use, named
//	defer client.Close()
//	bdevs, err := spdkrpc.BdevGetBdevs(ctx, client, "")
//
// NewClient does not dial: the first call does, and a call after a
// failure dials again. Hand the client to spdk.NewOrphans as its Caller,
// or call the typed calls yourself.
//
// # In depth
//
//   - Client: requests and replies are whole JSON values on one stream
//     (SPDK writes no length prefix). Concurrent callers share one
//     connection, take turns writing (one write carries the requests
//     queued meanwhile) and reading, and hand each other the replies by
//     id. A reply is bounded by ClientOptions.MaxReplySize and decoded
//     without reflection when it is a list of a wire type in the plain
//     form SPDK writes (a fuzz test holds that decoder to json.Unmarshal).
//   - Caller: what the typed calls need of a connection. *Client is one;
//     a host can bring its own (a forwarder to the process that owns the
//     socket, such as Longhorn's instance-manager), checked by
//     spdktest.RunConformanceTests. Package spdk/spdkrpc/mocks holds a
//     generated mock.
//   - Typed calls over any Caller: BdevGetBdevs, BdevLvolGetLvstores,
//     BdevLvolGetLvols, BdevRaidGetBdevs, BdevLvolDelete, BdevRaidDelete,
//     and the NVMe-oF calls (NvmfGetSubsystems, BdevNvmeGetControllers,
//     NvmfDeleteSubsystem, NvmfSubsystemRemoveNs,
//     NvmfSubsystemRemoveListener, BdevNvmeDetachController). Each
//     rejects a result of the wrong shape instead of reading it as
//     "nothing".
//   - Wire types (Bdev, Lvol, RaidBdev, NvmfSubsystem...): SPDK's JSON
//     objects with the fields SPDK writes (doc/jsonrpc.md and the RPC
//     handlers cited on each type); package spdktest answers with the same
//     types.
//
// # Errors
//
// A Call returns ctx.Err() when its context ends first; an *RPCError with
// SPDK's code and message when SPDK answered with an error (errors.Is(err,
// ErrNotFound) for -19, ENODEV); an error matching ErrConnection when
// the connection failed (dial, write, a dropped connection, or an
// unreadable reply: a *ProtocolError for garbage or a truncated value,
// for a reply to a request that had not gone out whole, and for a second
// reply to one request; ErrTooLarge, wrapping a *bounded.TooLargeError,
// for a reply over ClientOptions.MaxReplySize). Each reply is matched
// when it is read against the requests already written whole and not yet
// answered, and never matched again later: one arriving while its
// request's write is under way waits for that write, and before a write
// a call that finds no other reading the connection first reads the
// replies already waiting on the socket, so a reply SPDK sent before a
// request existed is never taken for its answer. (While another call is
// reading, a reply that reached the socket an instant before a write and
// is read just after it cannot be told from one sent after it.)
// Connection errors fail every call in flight on that connection and are
// retryable: the next call dials again. Only a request whose write failed
// before a byte left (SPDK dropped the idle connection, as on a restart)
// is sent again, once, on a new connection: SPDK never saw it.
//
// A *ResultError (errors.Is(err, ErrUnexpectedResult)) is a well-formed
// reply of the wrong shape: a null result, an object or a string where a
// list belongs, a list element that is null or has no name, a delete that
// answered anything but true. It never means "nothing exists" or "already
// gone"; the connection stays up. ErrUnexpectedResult is of the
// malformed-input class every caretaker package shares, so it also
// matches spdk.ErrUnexpectedResult. ErrClosed follows Close. NewClient
// fails with ErrInvalidOptions. Every error text starts with "spdkrpc: ".
//
// # Concurrency
//
// A Client is safe for concurrent use. It holds one connection while
// connected and starts no goroutine: the calls, one at a time, write their
// requests (the one writing takes along, in the same write, those queued
// meanwhile) and, one at a time, read the replies for all of them. Close
// fails the calls in flight. No call outlives its context: a cancelled
// call returns at once (a call that was reading hands the reading to
// another) and the one late reply SPDK owes it is dropped. The package
// keeps no time of its own: every wait is bounded by the caller's context.
package spdkrpc
