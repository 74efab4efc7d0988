package spdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync"
	"time"
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
//
// The request is encoded by hand around json.Marshal(params) and written
// by this call, or, while another call is writing, queued and written in
// one batch by the next writer (see conn.roundTrip). The reply is framed
// and its envelope checked by the connection's reader; the result is
// decoded by this call, without reflection when decodeFast can.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cn, id, err := c.connect(ctx)
	if err != nil {
		return err
	}
	bp := requestBuffers.Get().(*[]byte)
	body, err := appendRequest((*bp)[:0], method, id, params)
	if err != nil {
		putRequestBuffer(bp, body)
		return fmt.Errorf("spdk: %s: encoding params: %w", method, err)
	}
	rep, err := cn.roundTrip(ctx, id, body)
	putRequestBuffer(bp, body) // roundTrip keeps no reference to body
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return fmt.Errorf("spdk: %s: %w", method, err)
	}
	if rep.errCode != nil {
		return &RPCError{Method: method, Code: rep.errCode.Code, Message: rep.errCode.Message}
	}
	if result == nil || decodeFast(rep.result, result) {
		return nil
	}
	if err := json.Unmarshal(rep.result, result); err != nil {
		return &ResultError{Method: method, Err: err}
	}
	return nil
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

// requestBuffers recycles the buffers requests are encoded into.
var requestBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

func putRequestBuffer(bp *[]byte, b []byte) {
	if cap(b) <= 64<<10 { // a huge request's buffer is not worth keeping
		*bp = b[:0]
		requestBuffers.Put(bp)
	}
}

// appendRequest appends the JSON-RPC 2.0 request to b: what
// json.Marshal of {jsonrpc, method, id, params (omitted when nil)} writes,
// byte for byte, without marshalling the envelope by reflection.
func appendRequest(b []byte, method string, id uint64, params any) ([]byte, error) {
	b = append(b, `{"jsonrpc":"2.0","method":`...)
	b, err := appendJSONString(b, method)
	if err != nil {
		return b, err
	}
	b = append(b, `,"id":`...)
	b = strconv.AppendUint(b, id, 10)
	if params != nil {
		p, err := json.Marshal(params)
		if err != nil {
			return b, err
		}
		b = append(b, `,"params":`...)
		b = append(b, p...)
	}
	return append(b, '}'), nil
}

// appendJSONString appends s as json.Marshal quotes it: as it is when it
// needs no escape (every SPDK method name), else by json.Marshal itself.
func appendJSONString(b []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(s)
			return append(b, q...), err
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

// reply is one JSON-RPC response as the reader checked it, or the
// connection's failure.
type reply struct {
	result  []byte        // the raw result (at least "null") when errCode is nil
	errCode *rpcErrorBody // SPDK's error object, when it sent one
	err     error         // set instead of the fields when the connection failed
}

type rpcErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// conn is one connection and its reader.
type conn struct {
	nc net.Conn

	mu      sync.Mutex // guards pending, err, writing, queue, spare
	pending map[uint64]chan reply
	err     error
	// writing is true while a call holds the writer role. A call that
	// finds it taken appends its request to queue instead; the writer,
	// done with its own bytes, hands the role to queue's callers (closing
	// queue.turn), one of which writes the whole batch in one write.
	writing bool
	queue   *batch
	spare   []byte // a written batch's buffer, for the next batch

	// dlMu and dlGen keep a cancelled writer's deadline from landing on a
	// later write: the AfterFunc sets the past deadline only while its
	// write is the current one. wdl (owned by the writer role) is true
	// when such a deadline may be set and must be cleared.
	dlMu  sync.Mutex
	dlGen uint64
	wdl   bool

	broken chan struct{} // closed when the connection fails
	done   chan struct{} // closed when the reader has exited
	once   sync.Once
}

// batch is requests queued while another call was writing.
type batch struct {
	buf  []byte
	turn chan struct{} // closed when the writer role is free for this batch
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

// roundTrip registers a waiter for id, puts body on the wire and waits for
// the reply, the connection's failure or the end of ctx. It keeps no
// reference to body once it returns.
func (cn *conn) roundTrip(ctx context.Context, id uint64, body []byte) (reply, error) {
	ch := replyChans.Get().(chan reply)
	cn.mu.Lock()
	if cn.err != nil {
		err := cn.err
		cn.mu.Unlock()
		replyChans.Put(ch)
		return reply{}, err
	}
	cn.pending[id] = ch
	var turn chan struct{}
	var queued *batch
	if cn.writing {
		// Another call is writing: queue the request (a copy: body goes
		// back to its pool) for the batch written after it.
		queued = cn.queue
		if queued == nil {
			queued = &batch{buf: cn.spare[:0], turn: make(chan struct{})}
			cn.spare = nil
			cn.queue = queued
		}
		queued.buf = append(queued.buf, body...)
		turn = queued.turn
		cn.mu.Unlock()
	} else {
		cn.writing = true
		buf, fromBatch := body, false
		if q := cn.queue; q != nil {
			// A batch waits whose callers were handed the role but have
			// not taken it yet: this call writes it with its own request.
			q.buf = append(q.buf, body...)
			buf, fromBatch = q.buf, true
			cn.queue = nil
		}
		cn.mu.Unlock()
		if err := cn.writeOut(ctx, buf, fromBatch); err != nil {
			cn.unregister(id, ch)
			return reply{}, err
		}
	}
	for {
		select {
		case rep := <-ch:
			replyChans.Put(ch) // empty, and out of pending: nothing sends on it again
			if rep.err != nil {
				return reply{}, rep.err
			}
			return rep, nil
		case <-turn:
			turn = nil
			cn.mu.Lock()
			if cn.queue != queued || cn.writing || cn.err != nil || ctx.Err() != nil {
				// Another call took the batch (or the connection failed, or
				// this call is ending and leaves the batch to its others).
				cn.mu.Unlock()
				continue
			}
			cn.writing, cn.queue = true, nil
			cn.mu.Unlock()
			if err := cn.writeOut(ctx, queued.buf, true); err != nil {
				cn.unregister(id, ch)
				return reply{}, err
			}
		case <-ctx.Done():
			// The request may still go out in a batch; its reply, if it
			// ever comes, finds no waiter and is dropped.
			cn.unregister(id, ch)
			return reply{}, ctx.Err()
		}
	}
}

// replyChans recycles the channels calls wait on. A channel goes back only
// when nothing can send on it any more: every send happens under cn.mu to
// a channel taken out of pending in the same critical section.
var replyChans = sync.Pool{New: func() any { return make(chan reply, 1) }}

// unregister withdraws the waiter for id and recycles its channel, emptied
// of a reply (or failure) that came before the waiter left.
func (cn *conn) unregister(id uint64, ch chan reply) {
	cn.mu.Lock()
	delete(cn.pending, id)
	cn.mu.Unlock()
	select {
	case <-ch:
	default:
	}
	replyChans.Put(ch)
}

// writeOut writes buf while the caller holds the writer role, then
// releases the role, handing it to the batch queued meanwhile. A write
// interrupted half-way leaves the stream unusable, so any write error
// fails the connection; the error returned is the connection's first.
func (cn *conn) writeOut(ctx context.Context, buf []byte, fromBatch bool) error {
	var stop func() bool
	var gen uint64
	if ctx.Done() != nil {
		cn.dlMu.Lock()
		cn.dlGen++
		gen = cn.dlGen
		cn.dlMu.Unlock()
		stop = context.AfterFunc(ctx, func() {
			cn.dlMu.Lock()
			if cn.dlGen == gen {
				_ = cn.nc.SetWriteDeadline(time.Unix(1, 0))
			}
			cn.dlMu.Unlock()
		})
	}
	if cn.wdl {
		_ = cn.nc.SetWriteDeadline(time.Time{})
		cn.wdl = false
	}
	_, err := cn.nc.Write(buf)
	if stop != nil && !stop() {
		// The AfterFunc ran or is running: wait it out (dlMu) and retire
		// its generation; the next writer clears the deadline it set.
		cn.dlMu.Lock()
		cn.dlGen++
		cn.dlMu.Unlock()
		cn.wdl = true
	}
	if err != nil {
		cn.fail(fmt.Errorf("%w: write: %w", ErrConnection, err))
	}
	cn.mu.Lock()
	cn.writing = false
	if fromBatch && cap(buf) <= 64<<10 {
		cn.spare = buf[:0]
	}
	if q := cn.queue; q != nil {
		close(q.turn)
	}
	failure := cn.err
	cn.mu.Unlock()
	if err != nil {
		return failure
	}
	return nil
}

// fail records the connection's first failure, fails every waiter with it
// and closes the socket, which ends the reader.
func (cn *conn) fail(err error) {
	cn.once.Do(func() {
		cn.mu.Lock()
		cn.err = err
		// broken closes before any waiter hears of the failure, so a call
		// made after it dials a new connection instead of finding this one.
		close(cn.broken)
		// Sent under mu: a waiter that unregistered under mu can never
		// receive afterwards. Each channel holds one reply and gets at most
		// one, so no send blocks.
		for _, ch := range cn.pending {
			ch <- reply{err: err}
		}
		cn.pending = nil
		cn.mu.Unlock()
		_ = cn.nc.Close()
	})
}

// read frames replies until the connection fails, checks each one's
// envelope and hands it to the call waiting for its id.
func (cn *conn) read(maxSize int64) {
	defer close(cn.done)
	f := newFramer(cn.nc, maxSize)
	for {
		raw, err := f.next()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				err = fmt.Errorf("%w: %w", ErrConnection, net.ErrClosed)
			}
			cn.fail(err)
			return
		}
		id, rep, err := parseReply(raw)
		if err != nil {
			cn.fail(err)
			return
		}
		cn.deliver(id, rep)
	}
}

// deliver hands rep to the call waiting for id. A reply nobody waits for
// (its call was cancelled) is dropped.
func (cn *conn) deliver(id uint64, rep reply) {
	if rep.result != nil {
		// raw lives in the framer's buffer, which the next reply reuses.
		rep.result = append([]byte(nil), rep.result...)
	}
	cn.mu.Lock()
	if ch, ok := cn.pending[id]; ok {
		delete(cn.pending, id)
		ch <- rep // under mu, as in fail; never blocks
	}
	cn.mu.Unlock()
}

// parseReply reads the envelope of one reply, a JSON object the framer
// already validated: an object with "jsonrpc":"2.0", an unsigned integer
// id, and a result or an error object. Anything else is a *ProtocolError:
// no call can be matched and the stream cannot be trusted. Members are
// matched by their exact spelling, the way SPDK writes them.
func parseReply(raw []byte) (uint64, reply, error) {
	var version, idRaw, result, errRaw []byte
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return 0, reply{}, &ProtocolError{Err: errors.New("reply is not a JSON object")}
	}
	i = skipSpace(raw, i+1)
	for i < len(raw) && raw[i] != '}' {
		if raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
		keyEnd := skipValue(raw, i)
		key := raw[i:keyEnd]
		i = skipSpace(raw, keyEnd) + 1 // the ':'
		i = skipSpace(raw, i)
		end := skipValue(raw, i)
		switch string(key) {
		case `"jsonrpc"`:
			version = raw[i:end]
		case `"id"`:
			idRaw = raw[i:end]
		case `"result"`:
			result = raw[i:end]
		case `"error"`:
			errRaw = raw[i:end]
			if string(errRaw) == "null" {
				errRaw = nil
			}
		}
		i = skipSpace(raw, end)
	}
	if string(version) != `"2.0"` {
		return 0, reply{}, &ProtocolError{Err: fmt.Errorf("jsonrpc version %s, want \"2.0\"", version)}
	}
	var rep reply
	if errRaw != nil {
		rep.errCode = new(rpcErrorBody)
		if err := json.Unmarshal(errRaw, rep.errCode); err != nil {
			return 0, reply{}, &ProtocolError{Err: fmt.Errorf("error member: %w", err)}
		}
	} else if result == nil {
		return 0, reply{}, &ProtocolError{Err: errors.New("reply has neither result nor error")}
	}
	rep.result = result
	id, ok := parseID(idRaw)
	if !ok {
		if rep.errCode != nil {
			// SPDK answers a request it could not parse with a null id; the
			// stream is out of step and no call can be matched.
			return 0, reply{}, &ProtocolError{Err: fmt.Errorf("error reply without id: %s (code %d)", rep.errCode.Message, rep.errCode.Code)}
		}
		return 0, reply{}, &ProtocolError{Err: fmt.Errorf("reply id %q is not one this client sent", idRaw)}
	}
	return id, rep, nil
}

// parseID reads an id this client could have sent: a JSON number that is
// a decimal uint64.
func parseID(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if id > (math.MaxUint64-d)/10 {
			return 0, false
		}
		id = id*10 + d
	}
	return id, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the valid JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}
