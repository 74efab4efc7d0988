package fsstore

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// backupRefs is what block collection needs of a backup cfg.
type backupRefs struct {
	name, volumeName  string
	createdTime       string
	snapshotCreatedAt string
	// checksums are the blocks' checksums; the fast path slices them out
	// of the cfg's bytes, so a volume's 500k references cost no
	// allocation each.
	checksums [][]byte
	// checked: every checksum is known to be valid already (the fast
	// path read each as a canonical mapping, which only accepts 4 to 128
	// lowercase hex digits).
	checked bool
}

// scanBackup reads the fields block collection needs from a backup cfg,
// with the same validation as ParseBackup.
//
// Block collection reads every remaining backup cfg of a volume, tens of
// megabytes for a large one, and encoding/json decodes them at ~45 MB/s.
// So the common case, a cfg with no escapes in the fields we read and no
// surprises, goes through a strict hand-written scanner (~10x faster), and
// anything unusual falls back to encoding/json, which then decides. The
// fuzzer checks that both paths agree on every input.
func scanBackup(data []byte) (backupRefs, error) { return scanBackupInto(data, nil) }

// scanBackupInto is scanBackup with the checksums appended to buf[:0]
// (reused by a scanner that reads many cfgs: a large cfg has 500k blocks).
func scanBackupInto(data []byte, buf [][]byte) (backupRefs, error) {
	if r, ok := scanBackupFastInto(data, buf); ok {
		if err := checkScanned(r); err != nil {
			return backupRefs{}, err
		}
		return r, nil
	}
	return scanBackupSlow(data)
}

func checkScanned(r backupRefs) error {
	if err := checkNames(r.name, r.volumeName); err != nil {
		return err
	}
	if r.checked {
		return nil
	}
	for i, ck := range r.checksums {
		if !validChecksumBytes(ck) {
			return corrupt("backup cfg", errBadChecksum(i, string(ck)))
		}
	}
	return nil
}

// scanBackupSlow is the reference: encoding/json, as Longhorn reads it.
func scanBackupSlow(data []byte) (backupRefs, error) {
	var j struct {
		Name              string
		VolumeName        string
		SnapshotCreatedAt string
		CreatedTime       string
		Blocks            []BlockMapping
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return backupRefs{}, corrupt("backup cfg", err)
	}
	if err := checkBackup(j.Name, j.VolumeName, j.Blocks); err != nil {
		return backupRefs{}, err
	}
	cks := make([][]byte, len(j.Blocks))
	for i, b := range j.Blocks {
		cks[i] = []byte(b.BlockChecksum)
	}
	return backupRefs{name: j.Name, volumeName: j.VolumeName, createdTime: j.CreatedTime, snapshotCreatedAt: j.SnapshotCreatedAt, checksums: cks}, nil
}

// scanBackupFast scans a cfg with encoding/json's semantics for the
// fields it reads (keys matched case-insensitively, the last duplicate
// wins, null leaves a string unchanged and empties a list), and gives up
// (ok false) on anything it does not handle exactly: escapes or non-ASCII
// bytes in keys or in the values it reads, numbers that are not plain
// integers, null list elements, deep nesting, or any syntax error.
func scanBackupFast(data []byte) (r backupRefs, ok bool) { return scanBackupFastInto(data, nil) }

func scanBackupFastInto(data []byte, buf [][]byte) (r backupRefs, ok bool) {
	s := scanner{d: data, out: buf[:0]}
	seenBlocks := false
	s.ws()
	if !s.eat('{') {
		return r, false
	}
	s.ws()
	if s.eat('}') {
		return r, s.end()
	}
	for {
		s.ws()
		key, ok := s.plainString()
		if !ok {
			return r, false
		}
		s.ws()
		if !s.eat(':') {
			return r, false
		}
		s.ws()
		switch {
		case foldEq(key, "Name"):
			ok = s.stringField(&r.name)
		case foldEq(key, "VolumeName"):
			ok = s.stringField(&r.volumeName)
		case foldEq(key, "CreatedTime"):
			ok = s.stringField(&r.createdTime)
		case foldEq(key, "SnapshotCreatedAt"):
			ok = s.stringField(&r.snapshotCreatedAt)
		case foldEq(key, "Blocks"):
			// encoding/json decodes a repeated list into the elements
			// of the first; leave that to it.
			if seenBlocks {
				return r, false
			}
			seenBlocks = true
			r.checksums, ok = s.blocks()
			r.checked = !s.irregular
		default:
			ok = s.skip(0)
		}
		if !ok {
			return r, false
		}
		s.ws()
		if s.eat(',') {
			continue
		}
		if s.eat('}') {
			return r, s.end()
		}
		return r, false
	}
}

type scanner struct {
	d []byte
	i int
	// irregular: blocks read a mapping that was not canonical, so its
	// checksum still needs validating.
	irregular bool
	// out is where blocks appends (a reused buffer, or nil).
	out [][]byte
}

const maxScanDepth = 1000

func (s *scanner) ws() {
	for s.i < len(s.d) {
		switch s.d[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.d) && s.d[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.d)
}

func (s *scanner) literal(lit string) bool {
	if bytes.HasPrefix(s.d[s.i:], []byte(lit)) {
		s.i += len(lit)
		return true
	}
	return false
}

// plainString reads a string with no escapes and only printable ASCII.
func (s *scanner) plainString() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.d) && plainByte[s.d[s.i]] {
		s.i++
	}
	if s.i < len(s.d) && s.d[s.i] == '"' {
		s.i++
		return s.d[start : s.i-1], true
	}
	return nil, false
}

// plainByte marks printable ASCII other than '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// stringField reads a plain string into dst, or null (dst unchanged).
func (s *scanner) stringField(dst *string) bool {
	if s.literal("null") {
		return true
	}
	v, ok := s.plainString()
	if ok {
		*dst = string(v)
	}
	return ok
}

// bytesField is stringField without the copy: dst aliases the cfg bytes.
func (s *scanner) bytesField(dst *[]byte) bool {
	if s.literal("null") {
		return true
	}
	v, ok := s.plainString()
	if ok {
		*dst = v
	}
	return ok
}

// blocks reads the Blocks list: null, or objects with Offset and
// BlockChecksum.
func (s *scanner) blocks() ([][]byte, bool) {
	if s.literal("null") {
		return nil, true
	}
	if !s.eat('[') {
		return nil, false
	}
	// A block mapping takes ~90 bytes; guess the count to grow once.
	out := s.out
	if guess := (len(s.d)-s.i)/90 + 1; cap(out) < guess {
		out = make([][]byte, 0, guess)
	}
	s.ws()
	if s.eat(']') {
		return [][]byte{}, true
	}
	for {
		s.ws()
		ck, ok := s.canonicalBlock()
		if !ok {
			s.irregular = true
			ck, ok = s.block()
		}
		if !ok {
			return nil, false
		}
		out = append(out, ck)
		s.ws()
		if s.eat(',') {
			continue
		}
		if s.eat(']') {
			return out, true
		}
		return nil, false
	}
}

// canonicalBlock reads a block mapping exactly as encoding/json writes it,
// {"Offset":<digits>,"BlockChecksum":"<lowercase hex>"}, with a few
// comparisons instead of the general object walk; anything else leaves
// the position unchanged for block to read.
func (s *scanner) canonicalBlock() ([]byte, bool) {
	const head, mid = `{"Offset":`, `,"BlockChecksum":"`
	d, i := s.d, s.i
	if len(d)-i < len(head)+1+len(mid)+4+2 || string(d[i:i+len(head)]) != head {
		return nil, false
	}
	i += len(head)
	start := i
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	// Up to 18 digits always fits an int64; a leading 0 only alone.
	if n := i - start; n == 0 || n > 18 || d[start] == '0' && n > 1 {
		return nil, false
	}
	if len(d)-i < len(mid) || string(d[i:i+len(mid)]) != mid {
		return nil, false
	}
	i += len(mid)
	start = i
	// Longhorn's checksums are 64 digits: validated eight at a time.
	if j := i + 64; j+1 < len(d) && d[j] == '"' && d[j+1] == '}' && validChecksumBytes(d[i:j]) {
		s.i = j + 2
		return d[i:j], true
	}
	for i < len(d) && lowerHex[d[i]] {
		i++
	}
	if i+1 >= len(d) || d[i] != '"' || d[i+1] != '}' || i-start < 4 || i-start > 128 {
		return nil, false
	}
	s.i = i + 2
	return d[start:i], true
}

func (s *scanner) block() ([]byte, bool) {
	if !s.eat('{') {
		return nil, false
	}
	var ck []byte
	s.ws()
	if s.eat('}') {
		return nil, true
	}
	for {
		s.ws()
		key, ok := s.plainString()
		if !ok {
			return nil, false
		}
		s.ws()
		if !s.eat(':') {
			return nil, false
		}
		s.ws()
		switch {
		case foldEq(key, "BlockChecksum"):
			ok = s.bytesField(&ck)
		case foldEq(key, "Offset"):
			ok = s.int64Field()
		default:
			ok = s.skip(1)
		}
		if !ok {
			return nil, false
		}
		s.ws()
		if s.eat(',') {
			continue
		}
		if s.eat('}') {
			return ck, true
		}
		return nil, false
	}
}

// int64Field accepts null or a plain non-negative integer that fits an
// int64 (a negative offset makes the cfg corrupt; the slow path says so).
func (s *scanner) int64Field() bool {
	if s.literal("null") {
		return true
	}
	start := s.i
	if s.i < len(s.d) && s.d[s.i] == '-' {
		if !bytes.HasPrefix(s.d[s.i:], []byte("-0")) || s.i+2 < len(s.d) && s.d[s.i+2] >= '0' && s.d[s.i+2] <= '9' {
			return false
		}
		s.i++
	}
	digits := s.i
	for s.i < len(s.d) && s.d[s.i] >= '0' && s.d[s.i] <= '9' {
		s.i++
	}
	if s.i == digits || (s.d[digits] == '0' && s.i-digits > 1) {
		return false
	}
	if s.i < len(s.d) && (s.d[s.i] == '.' || s.d[s.i] == 'e' || s.d[s.i] == 'E') {
		return false
	}
	_, err := strconv.ParseInt(string(s.d[start:s.i]), 10, 64)
	return err == nil
}

// skip validates and skips any JSON value.
func (s *scanner) skip(depth int) bool {
	if depth > maxScanDepth || s.i >= len(s.d) {
		return false
	}
	switch c := s.d[s.i]; {
	case c == '"':
		return s.skipString()
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		s.i++
		s.ws()
		if s.eat(closer) {
			return true
		}
		for {
			s.ws()
			if c == '{' {
				if !s.skipString() {
					return false
				}
				s.ws()
				if !s.eat(':') {
					return false
				}
				s.ws()
			}
			if !s.skip(depth + 1) {
				return false
			}
			s.ws()
			if s.eat(',') {
				continue
			}
			return s.eat(closer)
		}
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		return s.skipNumber()
	}
}

func (s *scanner) skipString() bool {
	if !s.eat('"') {
		return false
	}
	for s.i < len(s.d) {
		c := s.d[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			s.i++
			if s.i >= len(s.d) {
				return false
			}
			switch s.d[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if s.i+4 >= len(s.d) {
					return false
				}
				for _, h := range s.d[s.i+1 : s.i+5] {
					if !isHex(h) {
						return false
					}
				}
				s.i += 5
			default:
				return false
			}
		default:
			s.i++
		}
	}
	return false
}

func (s *scanner) skipNumber() bool {
	s.eat('-')
	start := s.i
	for s.i < len(s.d) && s.d[s.i] >= '0' && s.d[s.i] <= '9' {
		s.i++
	}
	if s.i == start || (s.d[start] == '0' && s.i-start > 1) {
		return false
	}
	if s.eat('.') {
		f := s.i
		for s.i < len(s.d) && s.d[s.i] >= '0' && s.d[s.i] <= '9' {
			s.i++
		}
		if s.i == f {
			return false
		}
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		e := s.i
		for s.i < len(s.d) && s.d[s.i] >= '0' && s.d[s.i] <= '9' {
			s.i++
		}
		if s.i == e {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// foldEq is encoding/json's key match for ASCII keys: equal ignoring ASCII
// case. (Non-ASCII keys never reach it: plainString refuses them.)
func foldEq(key []byte, name string) bool {
	if len(key) != len(name) {
		return false
	}
	for i := range key {
		a, b := key[i], name[i]
		if a >= 'a' && a <= 'z' {
			a -= 'a' - 'A'
		}
		if b >= 'a' && b <= 'z' {
			b -= 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}
