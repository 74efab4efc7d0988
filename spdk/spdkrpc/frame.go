package spdkrpc

import (
	"errors"
	"fmt"
	"io"

	"github.com/caretaker-storage/caretaker/internal/bounded"
)

// framer cuts SPDK's reply stream into replies: whole JSON values back to
// back with no length prefix. It validates each value in one resumable
// pass over its own read buffer, so a reply is neither re-buffered nor
// scanned twice, and it never holds more than limit bytes of one reply:
// a reply counts from the end of the previous one (whitespace between
// them included) to its own end, and the reply that crosses limit fails
// with a *bounded.TooLargeError. A reply must be a JSON object; anything
// else (garbage, another kind of value) is a *ProtocolError, as is a
// stream that ends inside a value.
type framer struct {
	r     io.Reader
	limit int64
	buf   []byte
	start int // where the current reply begins (after the previous one)
	pos   int // how far the scan has read
	end   int // how far buf holds bytes from r
	scan  scanner
	// members are where the members of the reply next returned lie in it
	// (valid until the next call).
	members []member
}

// framerMinBuf is the read buffer a framer starts with and shrinks back
// to after a large reply.
const framerMinBuf = 4 << 10

func newFramer(r io.Reader, limit int64) *framer {
	return &framer{r: r, limit: limit, buf: make([]byte, framerMinBuf)}
}

// next returns the next reply, which stays valid until the next call.
// Without fill it only looks at what is buffered, and returns nil, nil
// when that holds no whole reply. After an error from the reader (a
// deadline) it resumes where it stopped; after any other error the
// stream is unusable.
func (f *framer) next(fill bool) ([]byte, error) {
	if f.start == f.end && f.scan.state == stBegin && cap(f.buf) > 1<<20 {
		f.buf, f.start, f.pos, f.end = make([]byte, framerMinBuf), 0, 0, 0
	}
	for {
		n, done, err := f.scan.step(f.buf[f.pos:f.end])
		f.pos += n
		if err != nil {
			return nil, &ProtocolError{Err: fmt.Errorf("byte %d of the reply: %w", f.pos-f.start, err)}
		}
		if int64(f.pos-f.start) > f.limit {
			return nil, fmt.Errorf("%w: %w", ErrConnection, &bounded.TooLargeError{What: "SPDK reply", Limit: f.limit})
		}
		if done {
			v := f.buf[f.scan.begin+f.start : f.pos]
			f.start = f.pos
			f.members = append(f.members[:0], f.scan.members...)
			for j := range f.members {
				m := &f.members[j]
				m.keyStart -= f.scan.begin
				m.keyEnd -= f.scan.begin
				m.valStart -= f.scan.begin
				m.valEnd -= f.scan.begin
			}
			f.scan.reset()
			return v, nil
		}
		if !fill {
			return nil, nil
		}
		if err := f.fill(); err != nil {
			return nil, err
		}
	}
}

// fill reads more bytes, making room first: what was consumed is dropped,
// and the buffer grows up to what one reply may need (limit+1 bytes, so
// that the byte over the limit is seen).
func (f *framer) fill() error {
	if err := f.room(); err != nil {
		return err
	}
	n, err := f.r.Read(f.buf[f.end:])
	f.end += n
	if n > 0 {
		return nil
	}
	return f.readError(err)
}

// fillNow is fill with readNow, which returns at once, reading nothing
// when nothing is waiting: got reports that bytes were read.
func (f *framer) fillNow(readNow func([]byte) (int, error)) (got bool, err error) {
	if err := f.room(); err != nil {
		return false, err
	}
	n, err := readNow(f.buf[f.end:])
	f.end += n
	if n > 0 || err == nil {
		return n > 0, nil
	}
	return false, f.readError(err)
}

// room makes room in buf for a read.
func (f *framer) room() error {
	if f.end == len(f.buf) {
		if f.start > 0 {
			n := copy(f.buf, f.buf[f.start:f.end])
			f.pos -= f.start
			f.end, f.start = n, 0
		}
		if f.end == len(f.buf) {
			size := int64(2 * len(f.buf))
			if max := f.limit + 1; size > max {
				size = max
			}
			if size <= int64(len(f.buf)) {
				// Cannot happen: the scan fails a reply over limit first.
				return fmt.Errorf("%w: %w", ErrConnection, &bounded.TooLargeError{What: "SPDK reply", Limit: f.limit})
			}
			nb := make([]byte, size)
			copy(nb, f.buf[:f.end])
			f.buf = nb
		}
	}
	return nil
}

// readError classifies the error of a read that returned no byte.
func (f *framer) readError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF) && f.scan.state == stBegin:
		return fmt.Errorf("%w: SPDK closed the connection", ErrConnection)
	case errors.Is(err, io.EOF):
		return &ProtocolError{Err: fmt.Errorf("truncated reply: %w", io.ErrUnexpectedEOF)}
	}
	return fmt.Errorf("%w: read: %w", ErrConnection, err)
}

// scanner is a resumable JSON validator for one top-level object: the
// grammar of RFC 8259 as encoding/json enforces it (control characters in
// strings and malformed escapes, numbers and literals are errors; bytes
// that are not UTF-8 pass, as there).
type scanner struct {
	state uint8
	key   bool   // the string being read is an object key
	hex   int    // hex digits left in a \u escape
	lit   string // the rest of the literal being read
	stack []byte // '{' or '[' for each open container
	begin int    // offset of the value's first byte, from the start of the reply
	off   int    // bytes scanned since reset
	// members are the top-level object's members, as offsets from the
	// start of the reply, so that parseReply need not scan it again.
	members []member
	cur     member // the member being read
}

const (
	stBegin        = iota // whitespace, then the reply's '{'
	stValue               // a value
	stValueOrClose        // after '[': a value or ']'
	stKeyOrClose          // after '{': a key or '}'
	stKey                 // after ',' in an object: a key
	stColon               // after a key
	stAfter               // after a value in a container: ',' or its close
	stString
	stEscape
	stHex
	stLiteral
	stNumMinus // after '-': a digit
	stNumZero  // after a leading 0
	stNumInt
	stNumDot // after '.': a digit
	stNumFrac
	stNumE     // after 'e': a sign or a digit
	stNumESign // after the exponent's sign: a digit
	stNumExp
	stDone
)

var errNotObject = errors.New("reply is not a JSON object")

// member is where one member of the top-level object lies: its key,
// quotes included, and its value.
type member struct{ keyStart, keyEnd, valStart, valEnd int }

func (s *scanner) reset() {
	s.state, s.stack, s.off, s.members = stBegin, s.stack[:0], 0, s.members[:0]
}

// plainInString holds the bytes a string takes as they are: all but the
// quote, the backslash and control characters.
var plainInString = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\'
	}
	return t
}()

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// step scans b, the bytes after those already scanned. It returns how
// many it consumed and whether they completed the value (which then ends
// at the last consumed byte).
func (s *scanner) step(b []byte) (int, bool, error) {
	n, done, err := s.scan(b)
	s.off += n
	return n, done, err
}

func (s *scanner) scan(b []byte) (int, bool, error) {
	i := 0
	for i < len(b) {
		c := b[i]
		switch s.state {
		case stString:
			for i < len(b) && plainInString[b[i]] {
				i++
			}
			if i == len(b) {
				return i, false, nil
			}
			switch c = b[i]; {
			case c == '"':
				if s.key {
					if len(s.stack) == 1 {
						s.cur.keyEnd = s.off + i + 1
					}
					s.state = stColon
				} else {
					s.valueEnd(i + 1)
				}
			case c == '\\':
				s.state = stEscape
			default:
				return i, false, fmt.Errorf("control character %#x in a string", c)
			}
		case stEscape:
			switch c {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.state = stString
			case 'u':
				s.state, s.hex = stHex, 4
			default:
				return i, false, fmt.Errorf("invalid escape %q", c)
			}
		case stHex:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return i, false, fmt.Errorf("invalid character %q in a \\u escape", c)
			}
			if s.hex--; s.hex == 0 {
				s.state = stString
			}
		case stLiteral:
			if c != s.lit[0] {
				return i, false, fmt.Errorf("invalid character %q in a literal", c)
			}
			if s.lit = s.lit[1:]; s.lit == "" {
				s.valueEnd(i + 1)
			}
		case stNumMinus, stNumZero, stNumInt, stNumDot, stNumFrac, stNumE, stNumESign, stNumExp:
			if s.state == stNumInt || s.state == stNumFrac || s.state == stNumExp {
				for i < len(b) && '0' <= b[i] && b[i] <= '9' {
					i++
				}
				if i == len(b) {
					return i, false, nil
				}
				c = b[i]
			}
			ok, end := s.number(c)
			if end {
				s.valueEnd(i)
				continue // c belongs to what follows the number
			}
			if !ok {
				return i, false, fmt.Errorf("invalid character %q in a number", c)
			}
		default:
			if isSpace(c) {
				break
			}
			if err := s.structural(c, i); err != nil {
				return i, false, err
			}
		}
		i++
		if s.state == stDone {
			return i, true, nil
		}
	}
	return i, false, nil
}

// structural handles c outside strings, numbers and literals.
func (s *scanner) structural(c byte, i int) error {
	switch s.state {
	case stBegin:
		if c != '{' {
			return errNotObject
		}
		s.begin = s.off + i
		s.stack = append(s.stack, '{')
		s.state = stKeyOrClose
		return nil
	case stValueOrClose:
		if c == ']' {
			return s.close(c, i)
		}
		return s.value(c)
	case stValue:
		if len(s.stack) == 1 {
			s.cur.valStart = s.off + i
		}
		return s.value(c)
	case stKeyOrClose:
		if c == '}' {
			return s.close(c, i)
		}
		fallthrough
	case stKey:
		if c != '"' {
			return fmt.Errorf("invalid character %q where an object key belongs", c)
		}
		if len(s.stack) == 1 {
			s.cur.keyStart = s.off + i
		}
		s.state, s.key = stString, true
		return nil
	case stColon:
		if c != ':' {
			return fmt.Errorf("invalid character %q after an object key", c)
		}
		s.state = stValue
		return nil
	case stAfter:
		switch c {
		case ',':
			if s.stack[len(s.stack)-1] == '{' {
				s.state = stKey
			} else {
				s.state = stValue
			}
			return nil
		case '}', ']':
			return s.close(c, i)
		}
	}
	return fmt.Errorf("invalid character %q after a value", c)
}

func (s *scanner) value(c byte) error {
	switch {
	case c == '{':
		s.stack = append(s.stack, '{')
		s.state = stKeyOrClose
	case c == '[':
		s.stack = append(s.stack, '[')
		s.state = stValueOrClose
	case c == '"':
		s.state, s.key = stString, false
	case c == '-':
		s.state = stNumMinus
	case c == '0':
		s.state = stNumZero
	case '1' <= c && c <= '9':
		s.state = stNumInt
	case c == 't':
		s.state, s.lit = stLiteral, "rue"
	case c == 'f':
		s.state, s.lit = stLiteral, "alse"
	case c == 'n':
		s.state, s.lit = stLiteral, "ull"
	default:
		return fmt.Errorf("invalid character %q where a value belongs", c)
	}
	return nil
}

func (s *scanner) close(c byte, i int) error {
	open := s.stack[len(s.stack)-1]
	if (open == '{') != (c == '}') {
		return fmt.Errorf("%q closes %q", c, open)
	}
	s.stack = s.stack[:len(s.stack)-1]
	s.valueEnd(i + 1)
	return nil
}

// valueEnd follows a value that ends before b[end] of the bytes being
// scanned.
func (s *scanner) valueEnd(end int) {
	switch len(s.stack) {
	case 0:
		s.state = stDone
	case 1:
		s.cur.valEnd = s.off + end
		s.members = append(s.members, s.cur)
		s.state = stAfter
	default:
		s.state = stAfter
	}
}

// number advances a number by c: ok when c continues it, end when c
// cannot and the number is complete without it.
func (s *scanner) number(c byte) (ok, end bool) {
	digit := '0' <= c && c <= '9'
	switch s.state {
	case stNumMinus:
		switch {
		case c == '0':
			s.state = stNumZero
		case digit:
			s.state = stNumInt
		default:
			return false, false
		}
	case stNumZero, stNumInt, stNumFrac:
		switch {
		case digit && s.state != stNumZero:
		case c == '.' && s.state != stNumFrac:
			s.state = stNumDot
		case c == 'e' || c == 'E':
			s.state = stNumE
		default:
			return false, true
		}
	case stNumDot:
		if !digit {
			return false, false
		}
		s.state = stNumFrac
	case stNumE:
		switch {
		case c == '+' || c == '-':
			s.state = stNumESign
		case digit:
			s.state = stNumExp
		default:
			return false, false
		}
	case stNumESign:
		if !digit {
			return false, false
		}
		s.state = stNumExp
	case stNumExp:
		if !digit {
			return false, true
		}
	}
	return true, false
}
