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

	"github.com/caretaker-storage/caretaker/internal/bounded"
)

// DefaultSocketPath is where SPDK's spdk_tgt listens for JSON-RPC by default.
const DefaultSocketPath = "/var/tmp/spdk.sock"

// DefaultMaxReplySize bounds one reply when ClientOptions.MaxReplySize is
// zero.
// A bdev_get_bdevs of ten thousand lvols is a few MiB; 64 MiB leaves room
// without letting a broken peer make the client allocate without bound.
const DefaultMaxReplySize = 64 << 20

// ClientOptions configure a Client. The zero value means the documented
// defaults.
type ClientOptions struct {
	// SocketPath is the Unix socket to dial; "" means DefaultSocketPath.
	SocketPath string
	// MaxReplySize bounds the bytes of one reply; 0 means
	// DefaultMaxReplySize. A larger reply fails the connection with an
	// error matching ErrTooLarge instead of being buffered.
	MaxReplySize int64
}

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
func NewClient(opts ClientOptions) *Client {
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
	lr := &bounded.Reader{R: cn.nc, Limit: maxSize, What: "SPDK reply"}
	dec := json.NewDecoder(lr)
	for {
		var rep reply
		err := dec.Decode(&rep)
		if err != nil {
			cn.fail(readError(err))
			return
		}
		// What the decoder buffered past this value belongs to the next
		// reply and counts against its limit. The read that crossed the
		// limit may still have completed this value: it is over the limit
		// all the same.
		buffered := bufferedLen(dec)
		if lr.Count()-buffered > maxSize {
			cn.fail(readError(&bounded.TooLargeError{What: lr.What, Limit: maxSize}))
			return
		}
		lr.Reset(buffered)
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

func readError(err error) error {
	var tooLarge *bounded.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return fmt.Errorf("%w: %w", ErrConnection, tooLarge)
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

func bufferedLen(dec *json.Decoder) int64 {
	if b, ok := dec.Buffered().(interface{ Len() int }); ok {
		return int64(b.Len())
	}
	return 0
}
