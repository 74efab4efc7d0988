package spdkrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	// DefaultMaxReplySize, and NewClient refuses a negative one. A larger
	// reply fails the connection with an error matching ErrTooLarge
	// instead of being buffered.
	MaxReplySize int64
}

// Client is a JSON-RPC 2.0 client over SPDK's Unix socket. Requests and
// replies are whole JSON values on one stream. The calls share one
// connection: one call at a time reads it and hands each reply to the
// call waiting for its id, so any number of goroutines may call at once.
// The zero value is not usable; use NewClient. A Client dials lazily and
// redials after a failure.
type Client struct {
	path    string
	maxSize int64

	mu     sync.Mutex // guards conn, closed, and dialing
	conn   *conn
	closed bool
	// live is conn while it works, for calls to find without mu; nil
	// after Close.
	live   atomic.Pointer[conn]
	nextID atomic.Uint64
}

var _ Caller = (*Client)(nil)

// NewClient returns a client for opts. It does not dial. It returns an
// error naming the option that is invalid (wrapping ErrInvalidOptions): a
// SocketPath with a NUL byte (the kernel would stop reading the path at
// it and dial another socket) or longer than a Unix socket address holds
// on this platform (107 bytes on Linux and Windows, 103 elsewhere), or a
// negative MaxReplySize.
func NewClient(opts ClientOptions) (*Client, error) {
	c := &Client{path: opts.SocketPath, maxSize: opts.MaxReplySize}
	if c.path == "" {
		c.path = DefaultSocketPath
	}
	if err := checkSocketPath(c.path); err != nil {
		return nil, fmt.Errorf("%w: SocketPath %q: %s", ErrInvalidOptions, opts.SocketPath, err)
	}
	switch {
	case c.maxSize < 0:
		return nil, fmt.Errorf("%w: MaxReplySize %d is negative (0 means DefaultMaxReplySize)", ErrInvalidOptions, opts.MaxReplySize)
	case c.maxSize == 0:
		c.maxSize = DefaultMaxReplySize
	}
	return c, nil
}

// checkSocketPath refuses a path the kernel would read as another one or
// that no Unix socket address can hold (sockaddr_un's sun_path: 108 bytes
// on Linux and Windows, 104 on the BSDs and macOS, with room for the
// terminating NUL except for a Linux abstract name, written "@name").
func checkSocketPath(path string) error {
	if strings.IndexByte(path, 0) >= 0 {
		return errors.New("contains a NUL byte")
	}
	limit := 103
	switch runtime.GOOS {
	case "linux", "android", "windows":
		limit = 107
		if path[0] == '@' {
			limit = 108
		}
	}
	if len(path) > limit {
		return fmt.Errorf("is %d bytes, longer than the %d a Unix socket address holds", len(path), limit)
	}
	return nil
}

// SocketPath returns the socket the client dials.
func (c *Client) SocketPath() string { return c.path }

// Close fails the calls in flight with ErrClosed and closes the
// connection. Later calls fail with ErrClosed. The client runs no
// goroutine of its own, so none outlives Close.
func (c *Client) Close() error {
	c.mu.Lock()
	cn := c.conn
	c.conn, c.closed = nil, true
	c.live.Store(nil)
	c.mu.Unlock()
	if cn != nil {
		cn.fail(ErrClosed)
	}
	return nil
}

// Call implements Caller.
//
// The request is encoded by hand around json.Marshal(params) and written
// by this call, or, when another call is writing, queued for that call to
// write with its own in one write (calls arriving together cost SPDK and
// the kernel one write, not one each). Then, if no other call is reading
// the connection, this call reads it, handing the replies it finds for
// others to them, until its own arrives; else it waits to be handed its
// reply or the reading. A single caller thus does what a raw client does:
// write, read. The result is decoded without reflection when decodeFast
// can.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	bp := requestBuffers.Get().(*[]byte)
	var rep reply
	for attempt := 0; ; attempt++ {
		cn, id, err := c.connect(ctx)
		if err != nil {
			requestBuffers.Put(bp)
			return err
		}
		body, err := appendRequest((*bp)[:0], method, id, params)
		if err != nil {
			putRequestBuffer(bp, body)
			return fmt.Errorf("spdkrpc: %s: encoding params: %w", method, err)
		}
		*bp = body
		var unsent bool
		rep, unsent, err = cn.roundTrip(ctx, id, body)
		if err == nil {
			break
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			putRequestBuffer(bp, body)
			return ctxErr
		}
		if unsent && attempt == 0 && !errors.Is(err, ErrClosed) {
			// Not one byte left: SPDK never saw the request, so it is safe
			// to send it again on a new connection. This is how a
			// connection SPDK dropped while idle (a restart) is found.
			continue
		}
		putRequestBuffer(bp, body)
		return fmt.Errorf("spdkrpc: %s: %w", method, err)
	}
	// The result was copied into the request's buffer (see register),
	// which goes back to the pool once the result is decoded: the
	// decoders copy what they keep.
	defer putRequestBuffer(bp, rep.result)
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
	if cn := c.live.Load(); cn != nil {
		select {
		case <-cn.broken:
		default:
			return cn, c.nextID.Add(1), nil
		}
	}
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
		// one connection, and a Unix socket dial is fast or fails fast:
		// connect(2) on Go's non-blocking socket connects, or fails, at
		// once. So the dial does not stop when ctx ends: a connection made
		// as this call's ctx ends is the one the calls share, and SPDK has
		// already accepted it; dropping it would cost a connection for
		// nothing. Only a ctx that ended before the dial keeps it from
		// starting.
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		var d net.Dialer
		nc, err := d.DialContext(context.WithoutCancel(ctx), "unix", c.path)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, 0, ctxErr
			}
			return nil, 0, fmt.Errorf("%w: %w", ErrConnection, err)
		}
		c.conn = newConn(nc, c.maxSize)
		c.live.Store(c.conn)
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
	}
	return c.conn, c.nextID.Add(1), nil
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

// reply is one JSON-RPC response as the reader checked it, the
// connection's failure, or the reading handed on.
type reply struct {
	result  []byte        // the raw result (at least "null") when errCode is nil
	errCode *rpcErrorBody // SPDK's error object, when it sent one
	err     error         // set instead of the fields when the connection failed
	promote bool          // instead of a reply: the receiver now reads the connection (result is then its waiter's buf)
}

type rpcErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// conn is one connection. It has no goroutine: the calls themselves
// write their requests and take turns reading.
type conn struct {
	nc net.Conn

	// The writer's role: one call at a time writes, and it writes, in
	// one write, its own request and every request queued while the
	// previous write was under way (write coalescing), then hands the
	// role to the first call that queued after that, or frees it.
	wmu     sync.Mutex     // guards writing, wq, werr, taken and every queued write's fields
	writing bool           // a call holds the writer's role
	wq      []*queuedWrite // requests waiting for the role, in arrival order
	werr    error          // the connection's failure, once a writer saw it
	taken   []*queuedWrite // the queued writes in the batch under way
	batch   []byte         // the buffer of a coalesced write; the role's holder's alone
	// calls counts the calls in roundTrip: with others under way, the
	// writer yields once before it takes the queue.
	calls atomic.Int64

	mu      sync.Mutex // guards pending, err, reading, abandoned
	pending map[uint64]waiter
	err     error
	// abandoned counts the waiters in pending whose calls stopped waiting
	// after their requests may have left (ch nil): each expects the one
	// reply SPDK owes it, to be dropped.
	abandoned int
	// readNow reads what is waiting on the socket without waiting (nil
	// when nc offers no raw access); only the reader's role uses it.
	readNow func([]byte) (int, error)
	// reading is true while a call holds the reader's role: it alone uses
	// fr, delivers the replies it reads to the calls in pending, and when
	// it leaves, hands the role to one of them (reply.promote) or, if
	// none waits, sets reading back to false.
	reading bool
	fr      *framer

	// dlMu and the generations keep a deadline set by a cancelled call's
	// interruption from landing on a later call's write or read: it lands
	// only while its call is the current writer or reader. wdl and rdl
	// (owned by the writer and the reader) say such a deadline may be set
	// and must be cleared.
	dlMu       sync.Mutex
	wgen, rgen uint64
	wdl, rdl   bool

	broken chan struct{} // closed when the connection fails
	once   sync.Once
}

func newConn(nc net.Conn, maxSize int64) *conn {
	return &conn{
		nc:      nc,
		pending: make(map[uint64]waiter),
		fr:      newFramer(nc, maxSize),
		readNow: readNowFunc(nc),
		broken:  make(chan struct{}),
	}
}

// replyChans recycles the channels calls wait on. A channel goes back only
// when nothing can send on it any more: every send happens under cn.mu to
// a channel taken out of pending in the same critical section, so each
// registration receives at most one message and no send blocks.
var replyChans = sync.Pool{New: func() any { return make(chan reply, 1) }}

// roundTrip registers a waiter for id, writes body and waits for the
// reply. unsent reports that the write failed before any byte left. It
// keeps no reference to body once it returns, but the reply's result is
// copied into body's array (grown if need be) once body is written.
func (cn *conn) roundTrip(ctx context.Context, id uint64, body []byte) (rep reply, unsent bool, err error) {
	cn.calls.Add(1)
	defer cn.calls.Add(-1)
	ch, err := cn.register(id, body[:0])
	if err != nil {
		return reply{}, false, err
	}
	in := cn.arm(ctx)
	if in != nil {
		defer in.disarm()
	}
	if unsent, err := cn.write(ctx, in, id, body); err != nil {
		cn.leave(id, ch)
		return reply{}, unsent, err
	}
	rep, err = cn.wait(ctx, in, id, ch)
	return rep, false, err
}

// waiter is a request that may be owed a reply: where its reply goes,
// and how far the request got. pending holds exactly the requests that
// may be owed one, so every reply is matched against it at the moment it
// is read: a reply to an id not in pending (a request not yet written, or
// already answered) is a *ProtocolError that fails the connection, never
// kept to be matched later and never dropped in silence. A reply to a
// request not yet in a write is one too, and one that arrives while the
// write carrying its request is under way (the write may be over and the
// writer not yet told) waits in early until the writer knows the request
// went out whole. A waiter whose call stopped waiting after its request
// may have left stays, with a nil ch, until the reply SPDK owes it comes
// (and is dropped) or the connection ends.
type waiter struct {
	ch    chan reply // nil once its call stopped waiting (abandoned)
	state uint8
	early *reply // a reply that came while state was reqWriting
	// buf is where the reply's result is copied out of the framer's
	// buffer: the array of the call's request, free once it is written
	// (a queued request was copied into the batch; the writer's own is
	// free once its write returned). An early reply, which comes while
	// the request may still be written from buf, is cloned instead.
	buf []byte
}

// How far a call's request got.
const (
	reqUnsent  = iota // registered; in no write yet
	reqWriting        // in a write under way
	reqWritten        // written whole
)

// register adds a waiter for id before its request is written, so that
// no reply can come before it is in pending. Its result will be copied
// into buf (see waiter).
func (cn *conn) register(id uint64, buf []byte) (chan reply, error) {
	ch := replyChans.Get().(chan reply)
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.err != nil {
		replyChans.Put(ch)
		return nil, cn.err
	}
	cn.pending[id] = waiter{ch: ch, buf: buf}
	return ch, nil
}

// markLocked moves the requests of ids, those still waited for, to state;
// cn.mu is held. Moved to reqWritten, a request's early reply goes to its
// call. Moved back to reqUnsent (its write stopped before any byte left),
// a request with an early reply was answered before SPDK could have read
// it: that is a *ProtocolError, returned for the caller to fail the
// connection with.
func (cn *conn) markLocked(state uint8, own uint64, taken []*queuedWrite) error {
	var err error
	mark := func(id uint64) {
		w, ok := cn.pending[id]
		if !ok {
			return
		}
		if w.early != nil {
			switch state {
			case reqWritten:
				cn.dropLocked(id, w)
				if w.ch != nil {
					w.ch <- *w.early
				}
				return
			case reqUnsent:
				err = &ProtocolError{Err: fmt.Errorf("reply to request %d before it was sent", id)}
			}
		}
		if w.ch == nil && state == reqUnsent {
			// Abandoned and never sent: SPDK owes it nothing.
			cn.dropLocked(id, w)
			return
		}
		w.state = state
		cn.pending[id] = w
	}
	mark(own)
	for _, qw := range taken {
		mark(qw.id)
	}
	return err
}

// dropLocked removes w, the waiter for id, from pending; cn.mu is held.
func (cn *conn) dropLocked(id uint64, w waiter) {
	delete(cn.pending, id)
	if w.ch == nil {
		cn.abandoned--
	}
}

// maxAbandoned bounds the waiters kept for calls that stopped waiting:
// past it, SPDK has left that many requests unanswered, and the
// connection is failed rather than remembering more.
const maxAbandoned = 4096

// abandonLocked keeps w, the waiter for id whose call stopped waiting
// after its request may have left, until SPDK's reply to it; cn.mu is
// held. It returns the error to fail the connection with when too many
// are kept.
func (cn *conn) abandonLocked(id uint64, w waiter) error {
	if cn.pending == nil { // failed: nothing more is read
		return nil
	}
	w.ch, w.buf = nil, nil
	cn.pending[id] = w
	if cn.abandoned++; cn.abandoned > maxAbandoned {
		return fmt.Errorf("%w: %d requests whose calls gave up are still unanswered", ErrConnection, cn.abandoned)
	}
	return nil
}

// leave withdraws the waiter for id, passes on the reading if it was
// handed to it meanwhile, and recycles its channel. A request that may
// have left stays owed its reply (see waiter), also when the reading was
// handed to its call as it stopped waiting: handOff took it out of
// pending, but SPDK still owes it the reply, which is dropped when it
// comes rather than failing the connection as a reply to nothing sent.
func (cn *conn) leave(id uint64, ch chan reply) {
	cn.mu.Lock()
	var err error
	if w, ok := cn.pending[id]; ok {
		if w.state == reqUnsent {
			delete(cn.pending, id)
		} else {
			err = cn.abandonLocked(id, w)
		}
	}
	// Every send on ch happens under cn.mu with id taken out of pending,
	// so what ch holds now is all it will ever get.
	var promoted bool
	select {
	case m := <-ch:
		if m.promote {
			promoted = true
			// Only a request written whole is handed the reading.
			err = cn.abandonLocked(id, waiter{state: reqWritten})
		}
	default:
	}
	cn.mu.Unlock()
	if err != nil {
		cn.fail(err)
	}
	if promoted {
		cn.handOff()
	}
	replyChans.Put(ch)
}

// write sends one request. A write interrupted half-way leaves the stream
// unusable, so a write error fails the connection and the error returned
// is the connection's first; but a write that this call's own ended ctx
// stopped before any byte left leaves the stream as it was, and only this
// call fails, with ctx's error.
//
// One call at a time holds the writer's role. A call that finds it taken
// queues its request and waits: the holder writes it with its own in one
// write, or hands it the role. Either way it learns the outcome of its
// own request: written, or unsent (not one byte of it left), or an error.
// A request is written at most once, and never after its call stopped
// waiting for it while it was still queued.
func (cn *conn) write(ctx context.Context, in *interruption, id uint64, body []byte) (unsent bool, err error) {
	cn.wmu.Lock()
	if cn.werr != nil {
		err := cn.werr
		cn.wmu.Unlock()
		return true, err
	}
	if !cn.writing {
		cn.writing = true
		cn.wmu.Unlock()
		return cn.writeBatch(ctx, in, id, body)
	}
	qw := queuedWrites.Get().(*queuedWrite)
	qw.id, qw.body = id, body
	cn.wq = append(cn.wq, qw)
	cn.wmu.Unlock()

	var o writeOutcome
	if done := ctx.Done(); done == nil {
		o = <-qw.done
	} else {
		select {
		case o = <-qw.done:
		case <-done:
			var decided bool
			if o, decided = cn.withdraw(qw); !decided {
				// In a write under way: it may reach SPDK or not; the call
				// ends now and the writer forgets qw.
				return false, ctx.Err()
			}
			if o.role {
				// Handed the role as ctx ended: pass it on unwritten.
				cn.wmu.Lock()
				cn.passWriteLocked()
				cn.wmu.Unlock()
				o = writeOutcome{unsent: true}
			}
			qw.recycle()
			return o.unsent, ctx.Err()
		}
	}
	qw.recycle()
	if o.role {
		return cn.writeBatch(ctx, in, id, body)
	}
	return o.unsent, o.err
}

// withdraw takes qw back after its call's ctx ended. decided is false when
// qw is in a write under way (it is then marked abandoned); else o is the
// message qw got: the role, or its write's outcome, or, still queued and
// now removed, unsent.
func (cn *conn) withdraw(qw *queuedWrite) (o writeOutcome, decided bool) {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	if i := slices.Index(cn.wq, qw); i >= 0 {
		cn.wq = slices.Delete(cn.wq, i, i+1)
		return writeOutcome{unsent: true}, true
	}
	select {
	case o = <-qw.done:
		return o, true
	default:
		qw.abandoned = true
		return writeOutcome{}, false
	}
}

// writeBatch writes body, and the requests queued meanwhile, as the holder
// of the writer's role, and passes the role on.
func (cn *conn) writeBatch(ctx context.Context, in *interruption, id uint64, body []byte) (unsent bool, err error) {
	if cn.wdl {
		_ = cn.nc.SetWriteDeadline(time.Time{})
		cn.wdl = false
	}
	if !in.enter(false) {
		cn.wmu.Lock()
		cn.passWriteLocked()
		cn.wmu.Unlock()
		return true, ctx.Err() // ended before a byte was written
	}
	if cn.calls.Load() > 1 {
		// Other calls are under way, and those just handed their replies
		// are about to write: let them queue, to go out in this write.
		runtime.Gosched()
	}
	// Replies already waiting on the socket are read, and matched, before
	// the requests of this write are: none can be taken for one of them.
	perr := cn.catchUp()
	// Take what queued while this call waited: the requests are copied, so
	// a call that stops waiting for its taken request may reuse its buffer.
	cn.wmu.Lock()
	out := body
	if len(cn.wq) > 0 {
		b := append(cn.batch[:0], body...)
		for _, qw := range cn.wq {
			qw.start = len(b)
			b = append(b, qw.body...)
			qw.body = nil
			cn.taken = append(cn.taken, qw)
		}
		clear(cn.wq)
		cn.wq = cn.wq[:0]
		cn.batch, out = b, b
	}
	cn.mu.Lock()
	_ = cn.markLocked(reqWriting, id, cn.taken)
	cn.mu.Unlock()
	cn.wmu.Unlock()

	var n int
	if perr != nil {
		cn.fail(perr)
		err = cn.failure() // nothing left: every request of the batch is unsent
	} else {
		n, err = cn.nc.Write(out)
	}
	if in.exit(false) {
		cn.wdl = true
	}
	if cap(cn.batch) > 64<<10 {
		cn.batch = nil // a huge batch's buffer is not worth keeping
	}
	if err != nil && n == 0 && errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
		// This call's ctx stopped the write before any byte left: the
		// stream is as it was. The others' requests go back to the head of
		// the queue, in order, unless their calls stopped waiting; the role
		// passes on.
		cn.wmu.Lock()
		back := make([]*queuedWrite, 0, len(cn.taken)+len(cn.wq))
		for i, qw := range cn.taken {
			end := len(out)
			if i+1 < len(cn.taken) {
				end = cn.taken[i+1].start
			}
			if !qw.abandoned {
				qw.body = out[qw.start:end]
				back = append(back, qw)
			}
		}
		cn.mu.Lock()
		perr := cn.markLocked(reqUnsent, id, cn.taken)
		cn.mu.Unlock()
		// The bodies now point into the batch buffer: it is theirs.
		cn.batch, cn.taken = nil, nil
		cn.wq = append(back, cn.wq...)
		cn.passWriteLocked()
		cn.wmu.Unlock()
		if perr != nil {
			cn.fail(perr)
		}
		return true, ctx.Err()
	}
	if err != nil && perr == nil {
		cn.fail(fmt.Errorf("%w: write: %w", ErrConnection, err))
		err = cn.failure()
	}
	cn.wmu.Lock()
	if err == nil {
		cn.mu.Lock()
		_ = cn.markLocked(reqWritten, id, cn.taken)
		cn.mu.Unlock()
	}
	for i, qw := range cn.taken {
		if !qw.abandoned {
			qw.done <- writeOutcome{unsent: err != nil && qw.start >= n, err: err}
		}
		cn.taken[i] = nil
	}
	cn.taken = cn.taken[:0]
	if err != nil {
		// Nothing more goes out on this connection: every queued request
		// is unsent, and so is any that comes.
		cn.werr = err
		for _, qw := range cn.wq {
			qw.done <- writeOutcome{unsent: true, err: err}
		}
		clear(cn.wq)
		cn.wq = cn.wq[:0]
	}
	cn.passWriteLocked()
	cn.wmu.Unlock()
	return err != nil && n == 0, err
}

// passWriteLocked hands the writer's role to the first queued request's
// call, or frees it. cn.wmu is held.
func (cn *conn) passWriteLocked() {
	if len(cn.wq) == 0 {
		cn.writing = false
		return
	}
	qw := cn.wq[0]
	// Shifted down, not resliced: the queue keeps its array.
	n := copy(cn.wq, cn.wq[1:])
	cn.wq[n] = nil
	cn.wq = cn.wq[:n]
	qw.done <- writeOutcome{role: true}
}

// queuedWrite is a request waiting for the writer's role. Its fields are
// guarded by cn.wmu.
type queuedWrite struct {
	id        uint64            // the request's id
	body      []byte            // the request; nil once copied into a batch
	start     int               // where it begins in the batch under way
	abandoned bool              // its call stopped waiting while it was in a write
	done      chan writeOutcome // the one message it gets: cap 1, never blocks
}

// recycle returns qw, which got its message and is in no queue, to the
// pool.
func (qw *queuedWrite) recycle() {
	qw.id, qw.body, qw.start, qw.abandoned = 0, nil, 0, false
	queuedWrites.Put(qw)
}

// writeOutcome is the message a queued write gets: the role (role), or the
// outcome of the write that carried its request.
type writeOutcome struct {
	role   bool
	unsent bool
	err    error
}

var queuedWrites = sync.Pool{New: func() any { return &queuedWrite{done: make(chan writeOutcome, 1)} }}

// interruption makes the end of one call's ctx interrupt the write or
// read the call is doing, by setting a past deadline on the socket, with
// one context.AfterFunc for the whole call rather than one per write and
// per read. The deadline lands only while the call holds the writer's or
// the reader's role under the generation it took on entering (checked
// under cn.dlMu), so it never lands on another call's write or read; one
// that landed is flagged (wdl, rdl) for the next holder to clear.
type interruption struct {
	cn   *conn
	stop func() bool
	// Guarded by cn.dlMu:
	fired      bool   // ctx ended: the AfterFunc ran
	w, r       uint64 // the generation of the role held; 0 when not held
	wset, rset bool   // the AfterFunc set a write (read) deadline
}

// arm returns the interruption of a call with ctx, nil when ctx never
// ends. The call disarms it when it returns.
func (cn *conn) arm(ctx context.Context) *interruption {
	if ctx.Done() == nil {
		return nil
	}
	in := &interruption{cn: cn}
	in.stop = context.AfterFunc(ctx, func() {
		cn.dlMu.Lock()
		defer cn.dlMu.Unlock()
		in.fired = true
		if in.w != 0 && in.w == cn.wgen {
			_ = cn.nc.SetWriteDeadline(time.Unix(1, 0))
			in.wset = true
		}
		if in.r != 0 && in.r == cn.rgen {
			_ = cn.nc.SetReadDeadline(time.Unix(1, 0))
			in.rset = true
		}
	})
	return in
}

// disarm ends the arrangement. The call holds no role by then, so an
// AfterFunc still running finds no generation of its own and sets nothing.
func (in *interruption) disarm() { in.stop() }

// roleOf returns the generation counter of the writer's (or reader's)
// role, the generation in holds of it, and its deadline flag.
func (in *interruption) roleOf(read bool) (gen, held *uint64, set *bool) {
	if read {
		return &in.cn.rgen, &in.r, &in.rset
	}
	return &in.cn.wgen, &in.w, &in.wset
}

// enter starts a write (or read) under a new generation. It reports
// false, starting nothing, when ctx already ended: the AfterFunc, having
// run, would not interrupt it. A nil in (ctx never ends) always enters.
func (in *interruption) enter(read bool) bool {
	if in == nil {
		return true
	}
	gen, held, _ := in.roleOf(read)
	in.cn.dlMu.Lock()
	defer in.cn.dlMu.Unlock()
	if in.fired {
		return false
	}
	*gen++
	*held = *gen
	return true
}

// exit retires the generation enter took, so that the AfterFunc can no
// longer set a deadline for it, and reports whether it set one.
func (in *interruption) exit(read bool) (deadlineSet bool) {
	if in == nil {
		return false
	}
	gen, held, set := in.roleOf(read)
	in.cn.dlMu.Lock()
	defer in.cn.dlMu.Unlock()
	*gen++
	*held = 0
	deadlineSet, *set = *set, false
	return deadlineSet
}

// wait returns the reply to id: read by this call if no other call is
// reading, else handed over by the reader (or the reading itself).
func (cn *conn) wait(ctx context.Context, in *interruption, id uint64, ch chan reply) (reply, error) {
	cn.mu.Lock()
	if w, waiting := cn.pending[id]; waiting && !cn.reading {
		cn.reading = true
		delete(cn.pending, id)
		cn.mu.Unlock()
		return cn.read(ctx, in, id, ch, w.buf)
	}
	cn.mu.Unlock()
	var m reply
	if done := ctx.Done(); done == nil {
		m = <-ch
	} else {
		select {
		case m = <-ch:
		case <-done:
			// The reply, when it comes, is dropped (see waiter).
			cn.leave(id, ch)
			return reply{}, ctx.Err()
		}
	}
	if m.promote {
		return cn.read(ctx, in, id, ch, m.result)
	}
	replyChans.Put(ch) // empty, and out of pending
	if m.err != nil {
		return reply{}, m.err
	}
	return m, nil
}

// read holds the reader's role (and id is out of pending) until the reply
// to id arrives, the connection fails or ctx ends; the replies it reads
// for others go to them.
func (cn *conn) read(ctx context.Context, in *interruption, id uint64, ch chan reply, buf []byte) (rep reply, err error) {
	defer replyChans.Put(ch) // out of pending: nothing sends on it
	if err := cn.failure(); err != nil {
		cn.handOff()
		return reply{}, err
	}
	if cn.rdl {
		_ = cn.nc.SetReadDeadline(time.Time{})
		cn.rdl = false
	}
	if !in.enter(true) {
		cn.abandon(id)
		cn.handOff()
		return reply{}, ctx.Err()
	}
	defer func() {
		if in.exit(true) {
			cn.rdl = true
		}
		cn.handOff()
	}()
	for {
		raw, err := cn.fr.next(true)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if ctxErr := ctx.Err(); ctxErr != nil {
					// The framer keeps what it read of the reply under way
					// for the next reader, who drops the reply to id.
					cn.abandon(id)
					return reply{}, ctxErr
				}
				// An earlier reader's deadline, landed before its
				// generation retired; cleared, the read goes on.
				_ = cn.nc.SetReadDeadline(time.Time{})
				continue
			}
			cn.fail(err)
			return reply{}, cn.failure()
		}
		rid, rep, err := parseReply(raw, cn.fr.members)
		if err != nil {
			cn.fail(err)
			return reply{}, cn.failure()
		}
		if rid != id {
			if err := cn.deliver(rid, rep); err != nil {
				cn.fail(err)
				return reply{}, cn.failure()
			}
			continue
		}
		rep.result = append(buf, rep.result...) // raw lives in the framer's buffer
		// Replies already buffered go out before the role does.
		for {
			raw, err := cn.fr.next(false)
			if raw == nil || err != nil {
				break // an error shows again to the next reader
			}
			rid, other, err := parseReply(raw, cn.fr.members)
			if err != nil {
				cn.fail(err)
				break
			}
			if err := cn.deliver(rid, other); err != nil {
				cn.fail(err)
				break
			}
		}
		return rep, nil
	}
}

// abandon keeps id, whose request went out whole and whose call, the
// reader, stopped waiting, owed its reply (see waiter).
func (cn *conn) abandon(id uint64) {
	cn.mu.Lock()
	err := cn.abandonLocked(id, waiter{state: reqWritten})
	cn.mu.Unlock()
	if err != nil {
		cn.fail(err)
	}
}

// catchUp reads the replies already waiting on the socket, without
// waiting for more, and matches each against pending as it stands: the
// writer calls it just before a write, so that a reply SPDK sent before
// the write's requests existed is a *ProtocolError, not their answer. It
// runs only when no call holds the reader's role (it takes the role for
// the while); a reader at work takes such replies itself as they come.
// It returns the error to fail the connection with: an unreadable reply,
// a reply to nothing sent, or a socket SPDK closed (then the write's
// requests are unsent, and the calls send them on a new connection).
func (cn *conn) catchUp() error {
	if cn.readNow == nil {
		return nil
	}
	cn.mu.Lock()
	if cn.reading || cn.err != nil {
		cn.mu.Unlock()
		return nil
	}
	cn.reading = true
	cn.mu.Unlock()
	defer cn.handOff()
	if cn.rdl {
		_ = cn.nc.SetReadDeadline(time.Time{})
		cn.rdl = false
	}
	for {
		got, err := cn.fr.fillNow(cn.readNow)
		if err != nil {
			return err
		}
		for {
			raw, err := cn.fr.next(false)
			if err != nil {
				return err
			}
			if raw == nil {
				break
			}
			rid, rep, err := parseReply(raw, cn.fr.members)
			if err != nil {
				return err
			}
			if err := cn.deliver(rid, rep); err != nil {
				return err
			}
		}
		if !got {
			return nil
		}
	}
}

// handOff gives the reader's role to a waiting call, or frees it.
func (cn *conn) handOff() {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	for id, w := range cn.pending {
		// Only a call whose request went out whole can read: the others
		// are still writing, and each becomes the reader if none is when
		// it comes to wait.
		if w.state == reqWritten && w.early == nil && w.ch != nil {
			delete(cn.pending, id)
			w.ch <- reply{promote: true, result: w.buf}
			return
		}
	}
	cn.reading = false
}

// failure returns the connection's failure, nil while it works.
func (cn *conn) failure() error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.err
}

// fail records the connection's first failure, fails every waiter with it
// and closes the socket, which ends a read or write under way.
func (cn *conn) fail(err error) {
	cn.once.Do(func() {
		cn.mu.Lock()
		cn.err = err
		// broken closes before any waiter hears of the failure, so a call
		// made after it dials a new connection instead of finding this one.
		close(cn.broken)
		for _, w := range cn.pending {
			if w.ch != nil {
				w.ch <- reply{err: err}
			}
		}
		cn.pending = nil
		cn.mu.Unlock()
		_ = cn.nc.Close()
	})
}

// deliver hands rep to the call waiting for id at the moment it is read.
// The reply to a call that stopped waiting is dropped. A reply to a
// request not written whole yet waits for the writer (see waiter), or, if
// the request is in no write, or already has a reply waiting, is a
// *ProtocolError, as is a reply to an id not in pending: never written,
// or already answered. The caller fails the connection with it.
func (cn *conn) deliver(id uint64, rep reply) error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	w, ok := cn.pending[id]
	if !ok {
		return &ProtocolError{Err: fmt.Errorf("reply to request %d, which was not sent or was already answered", id)}
	}
	// raw lives in the framer's buffer: the result is copied out.
	switch {
	case w.state == reqWritten && w.ch == nil:
		cn.dropLocked(id, w)
	case w.state == reqWritten:
		delete(cn.pending, id)
		rep.result = append(w.buf, rep.result...)
		w.ch <- rep
	case w.state == reqWriting && w.early == nil:
		if w.ch != nil {
			rep.result = bytes.Clone(rep.result) // buf may be under a write
		} else {
			rep.result = nil // dropped once the write is known whole
		}
		w.early = &rep
		cn.pending[id] = w
	case w.state == reqWriting:
		return &ProtocolError{Err: fmt.Errorf("two replies to request %d", id)}
	default:
		return &ProtocolError{Err: fmt.Errorf("reply to request %d before it was sent", id)}
	}
	return nil
}

// parseReply reads the envelope of one reply, a JSON object the framer
// already validated, from the members the framer found in it: an object
// with "jsonrpc":"2.0", an unsigned integer id, and a result or an error
// object. Anything else is a *ProtocolError: no call can be matched and
// the stream cannot be trusted. Members are matched by their exact
// spelling, the way SPDK writes them; of a repeated one the last counts.
func parseReply(raw []byte, members []member) (uint64, reply, error) {
	var version, idRaw, result, errRaw []byte
	for _, m := range members {
		val := raw[m.valStart:m.valEnd]
		switch string(raw[m.keyStart:m.keyEnd]) {
		case `"jsonrpc"`:
			version = val
		case `"id"`:
			idRaw = val
		case `"result"`:
			result = val
		case `"error"`:
			errRaw = val
			if string(errRaw) == "null" {
				errRaw = nil
			}
		}
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
