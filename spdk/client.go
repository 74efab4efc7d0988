package spdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// DefaultSocketPath is where SPDK's spdk_tgt listens for JSON-RPC by default.
const DefaultSocketPath = "/var/tmp/spdk.sock"

// DefaultMaxReplySize bounds one reply when Options.MaxReplySize is zero.
// A bdev_get_bdevs of ten thousand lvols is a few MiB; 64 MiB leaves room
// without letting a broken peer make the client allocate without bound.
const DefaultMaxReplySize = 64 << 20

// Caller is what Inventory and Deleter need of an SPDK connection. *Client
// implements it; tests and hosts may substitute their own (see package
// spdk/mocks).
type Caller interface {
	// Call sends one JSON-RPC request and decodes the reply's result into
	// result (which may be nil to discard it). It may be called from many
	// goroutines at once. It returns ctx.Err() when ctx ends first, an
	// *RPCError when SPDK answered with an error (errors.Is(err,
	// ErrNoSuchDevice) for -19), and an error wrapping ErrConnection when
	// the connection failed; connection errors are retryable, RPC errors
	// usually are not.
	Call(ctx context.Context, method string, params, result any) error
}

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -source=client.go -destination=mocks/client.go -package=mocks

// Options configure a Client. The zero value means the documented defaults.
type Options struct {
	// SocketPath is the Unix socket to dial; "" means DefaultSocketPath.
	SocketPath string
	// MaxReplySize bounds the bytes of one reply; 0 means
	// DefaultMaxReplySize. A larger reply fails the connection with
	// ErrReplyTooLarge instead of being buffered.
	MaxReplySize int64
}

// Sentinel errors, for errors.Is.
var (
	// ErrNoSuchDevice: SPDK answered -19 (ENODEV), the bdev or lvol does
	// not exist. *RPCError matches it.
	ErrNoSuchDevice = errors.New("spdk: no such device")
	// ErrConnection: the connection to SPDK failed (dial, write, read, or
	// an unreadable reply). The call's outcome is unknown; the next call
	// dials again.
	ErrConnection = errors.New("spdk: connection failed")
	// ErrReplyTooLarge: a reply exceeded Options.MaxReplySize. It also
	// matches ErrConnection: the stream cannot be resynchronised.
	ErrReplyTooLarge = errors.New("spdk: reply too large")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("spdk: client closed")
	// ErrUnexpectedResult: SPDK answered, but the result is not what the
	// method returns: null, an object where a list belongs, a list of
	// non-objects or of nameless objects, anything but true from a delete.
	// It is never read as "nothing exists" or "already gone". *ResultError
	// matches it. The connection stays usable; the call may be retried.
	ErrUnexpectedResult = errors.New("spdk: unexpected result")
)

// The JSON-RPC 2.0 error codes SPDK uses, and ENODEV as SPDK returns it.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	CodeNoSuchDevice   = -19
)

// RPCError is an error reply from SPDK, with its code and message as sent.
type RPCError struct {
	Method  string
	Code    int
	Message string
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("spdk: %s: %s (code %d)", e.Method, e.Message, e.Code)
}

// Is reports ErrNoSuchDevice for code -19.
func (e *RPCError) Is(target error) bool {
	return target == ErrNoSuchDevice && e.Code == CodeNoSuchDevice
}

// ProtocolError is a reply that is not valid JSON-RPC: garbage bytes, a
// truncated value, a value of the wrong shape. It fails the connection and
// matches ErrConnection.
type ProtocolError struct {
	Err error
}

func (e *ProtocolError) Error() string { return "spdk: unreadable reply: " + e.Err.Error() }

// Unwrap returns the decoding error.
func (e *ProtocolError) Unwrap() error { return e.Err }

// Is reports ErrConnection.
func (e *ProtocolError) Is(target error) bool { return target == ErrConnection }

// ResultError is a well-formed reply whose result does not decode into the
// type the caller asked for, or is null, or breaks what the method
// promises (see ErrUnexpectedResult, which it matches). The connection
// stays usable.
type ResultError struct {
	Method string
	Err    error
}

func (e *ResultError) Error() string {
	return fmt.Sprintf("spdk: %s: unexpected result: %v", e.Method, e.Err)
}

// Unwrap returns the decoding error.
func (e *ResultError) Unwrap() error { return e.Err }

// Is reports ErrUnexpectedResult.
func (e *ResultError) Is(target error) bool { return target == ErrUnexpectedResult }

// Client is a JSON-RPC 2.0 client over SPDK's Unix socket. Requests and
// replies are whole JSON values on one stream; one reader goroutine per
// connection hands each reply to the call waiting for its id, so any
// number of goroutines may call at once. The zero value is not usable; use
// NewClient. A Client dials lazily and redials after a failure.
type Client struct {
	path    string
	maxSize int64

	mu     sync.Mutex // guards conn, closed, nextID
	conn   *conn
	closed bool
	nextID uint64
}

var _ Caller = (*Client)(nil)

// NewClient returns a client for opts. It does not dial.
func NewClient(opts Options) *Client {
	c := &Client{path: opts.SocketPath, maxSize: opts.MaxReplySize}
	if c.path == "" {
		c.path = DefaultSocketPath
	}
	if c.maxSize <= 0 {
		c.maxSize = DefaultMaxReplySize
	}
	return c
}

// SocketPath returns the socket the client dials.
func (c *Client) SocketPath() string { return c.path }

// Close fails the calls in flight with ErrClosed, closes the connection and
// waits for its reader goroutine to exit. Later calls fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	cn := c.conn
	c.conn, c.closed = nil, true
	c.mu.Unlock()
	if cn != nil {
		cn.fail(ErrClosed)
		<-cn.done
	}
	return nil
}

// Call implements Caller.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req := request{Version: "2.0", Method: method, Params: params}
	cn, id, err := c.connect(ctx)
	if err != nil {
		return err
	}
	req.ID = id
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("spdk: %s: encoding params: %w", method, err)
	}
	ch := cn.register(id)
	if ch == nil {
		return cn.failure(method)
	}
	if err := cn.write(ctx, body); err != nil {
		cn.unregister(id)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return fmt.Errorf("spdk: %s: %w: %w", method, ErrConnection, err)
	}
	select {
	case rep := <-ch:
		if rep.err != nil {
			return fmt.Errorf("spdk: %s: %w", method, rep.err)
		}
		if rep.Error != nil {
			return &RPCError{Method: method, Code: rep.Error.Code, Message: rep.Error.Message}
		}
		if result == nil {
			return nil
		}
		if err := json.Unmarshal(rep.Result, result); err != nil {
			return &ResultError{Method: method, Err: err}
		}
		return nil
	case <-ctx.Done():
		// The reply, if it ever comes, finds no waiter and is dropped.
		cn.unregister(id)
		return ctx.Err()
	}
}

// connect returns the live connection, dialing one if needed, and the id
// for the next request.
func (c *Client) connect(ctx context.Context) (*conn, uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, 0, ErrClosed
	}
	if c.conn != nil {
		select {
		case <-c.conn.broken:
			c.conn = nil
		default:
		}
	}
	if c.conn == nil {
		// Dialing under the lock is deliberate: concurrent callers share
		// one connection, and a Unix socket dial is fast or fails fast.
		var d net.Dialer
		nc, err := d.DialContext(ctx, "unix", c.path)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, 0, ctxErr
			}
			return nil, 0, fmt.Errorf("%w: %w", ErrConnection, err)
		}
		c.conn = newConn(nc, c.maxSize)
	}
	c.nextID++
	return c.conn, c.nextID, nil
}

type request struct {
	Version string `json:"jsonrpc"`
	Method  string `json:"method"`
	ID      uint64 `json:"id"`
	Params  any    `json:"params,omitempty"`
}

// reply is one decoded JSON-RPC response, or the connection's failure.
type reply struct {
	Version string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`

	err error // set instead of the fields when the connection failed
}

// conn is one connection and its reader.
type conn struct {
	nc net.Conn

	writeMu sync.Mutex // one request on the wire at a time

	mu      sync.Mutex // guards pending and err
	pending map[uint64]chan reply
	err     error

	broken chan struct{} // closed when the connection fails
	done   chan struct{} // closed when the reader has exited
	once   sync.Once
}

func newConn(nc net.Conn, maxSize int64) *conn {
	cn := &conn{
		nc:      nc,
		pending: make(map[uint64]chan reply),
		broken:  make(chan struct{}),
		done:    make(chan struct{}),
	}
	go cn.read(maxSize)
	return cn
}

// register adds a waiter for id; nil if the connection already failed.
func (cn *conn) register(id uint64) chan reply {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.err != nil {
		return nil
	}
	ch := make(chan reply, 1)
	cn.pending[id] = ch
	return ch
}

func (cn *conn) unregister(id uint64) {
	cn.mu.Lock()
	delete(cn.pending, id)
	cn.mu.Unlock()
}

// failure returns the error a call on a failed connection reports.
func (cn *conn) failure(method string) error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return fmt.Errorf("spdk: %s: %w", method, cn.err)
}

// write sends one request. A write interrupted half-way leaves the stream
// unusable, so any write error fails the connection.
func (cn *conn) write(ctx context.Context, body []byte) error {
	cn.writeMu.Lock()
	defer cn.writeMu.Unlock()
	if dl, ok := ctx.Deadline(); ok {
		_ = cn.nc.SetWriteDeadline(dl)
	} else {
		_ = cn.nc.SetWriteDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { _ = cn.nc.SetWriteDeadline(time.Unix(1, 0)) })
	_, err := cn.nc.Write(body)
	stop()
	if err != nil {
		cn.fail(fmt.Errorf("%w: write: %w", ErrConnection, err))
	}
	return err
}

// fail records the connection's first failure, fails every waiter with it
// and closes the socket, which ends the reader.
func (cn *conn) fail(err error) {
	cn.once.Do(func() {
		cn.mu.Lock()
		cn.err = err
		pending := cn.pending
		cn.pending = nil
		cn.mu.Unlock()
		close(cn.broken)
		_ = cn.nc.Close()
		for _, ch := range pending {
			ch <- reply{err: err}
		}
	})
}

// read decodes replies until the connection fails, handing each to the
// call waiting for its id.
func (cn *conn) read(maxSize int64) {
	defer close(cn.done)
	lr := &limitReader{r: cn.nc, max: maxSize}
	dec := json.NewDecoder(lr)
	for {
		var rep reply
		err := dec.Decode(&rep)
		if err != nil {
			cn.fail(readError(err, lr))
			return
		}
		// What the decoder buffered past this value belongs to the next
		// reply and counts against its limit.
		lr.reset(bufferedLen(dec))
		if err := cn.deliver(rep); err != nil {
			cn.fail(err)
			return
		}
	}
}

// deliver hands rep to its waiter. A reply nobody waits for (its call was
// cancelled) is dropped; a reply that cannot belong to any call fails the
// connection.
func (cn *conn) deliver(rep reply) error {
	if rep.Version != "2.0" {
		return &ProtocolError{Err: fmt.Errorf("jsonrpc version %q, want \"2.0\"", rep.Version)}
	}
	if rep.Error == nil && rep.Result == nil {
		return &ProtocolError{Err: errors.New("reply has neither result nor error")}
	}
	raw := bytes.TrimSpace(rep.ID)
	id, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil {
		if rep.Error != nil {
			// SPDK answers a request it could not parse with a null id; the
			// stream is out of step and no call can be matched.
			return &ProtocolError{Err: fmt.Errorf("error reply without id: %s (code %d)", rep.Error.Message, rep.Error.Code)}
		}
		return &ProtocolError{Err: fmt.Errorf("reply id %q is not one this client sent", raw)}
	}
	cn.mu.Lock()
	ch, ok := cn.pending[id]
	delete(cn.pending, id)
	cn.mu.Unlock()
	if ok {
		ch <- rep
	}
	return nil
}

func readError(err error, lr *limitReader) error {
	switch {
	case lr.exceeded:
		return fmt.Errorf("%w: over %d bytes: %w", ErrReplyTooLarge, lr.max, ErrConnection)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: SPDK closed the connection", ErrConnection)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &ProtocolError{Err: fmt.Errorf("truncated reply: %w", err)}
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) {
		return &ProtocolError{Err: err}
	}
	if errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrConnection, err)
	}
	return fmt.Errorf("%w: read: %w", ErrConnection, err)
}

// limitReader fails once more than max bytes were read since the last
// reset, so one reply can never make the decoder buffer more than max.
type limitReader struct {
	r        io.Reader
	max      int64
	n        int64
	exceeded bool
}

var errLimit = errors.New("reply size limit exceeded")

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n >= l.max {
		l.exceeded = true
		return 0, errLimit
	}
	if rem := l.max - l.n; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := l.r.Read(p)
	l.n += int64(n)
	return n, err
}

func (l *limitReader) reset(buffered int64) { l.n = buffered }

func bufferedLen(dec *json.Decoder) int64 {
	if b, ok := dec.Buffered().(interface{ Len() int }); ok {
		return int64(b.Len())
	}
	return 0
}
