//go:build unix

package spdkrpc

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// readNowFunc returns a read of what is waiting on nc's socket that never
// waits: (0, nil) when nothing is, io.EOF when the peer closed it. It
// returns nil when nc offers no raw access (then the client skips the
// catch-up read before a write).
func readNowFunc(nc net.Conn) func([]byte) (int, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawReader{rc: rc}
	r.fn = r.read // bound once: no allocation per read
	return r.readNow
}

// rawReader does one non-blocking read(2) on a socket Go keeps in
// non-blocking mode. Only the holder of the reader's role uses it.
type rawReader struct {
	rc  syscall.RawConn
	fn  func(fd uintptr) bool
	p   []byte
	n   int
	err error
}

func (r *rawReader) read(fd uintptr) bool {
	r.n, r.err = syscall.Read(int(fd), r.p)
	return true // never wait for readiness
}

func (r *rawReader) readNow(p []byte) (int, error) {
	r.p = p
	err := r.rc.Read(r.fn)
	n, rerr := r.n, r.err
	r.p, r.n, r.err = nil, 0, nil
	switch {
	case err != nil:
		return 0, err
	case errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK) || errors.Is(rerr, syscall.EINTR):
		return 0, nil
	case rerr != nil:
		return 0, rerr
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}
