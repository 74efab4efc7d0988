//go:build !unix

package spdkrpc

import "net"

// readNowFunc returns nil: without a raw read that never waits, the client
// skips the catch-up read before a write.
func readNowFunc(net.Conn) func([]byte) (int, error) { return nil }
