package lhreplica

// parseMetaFast reads a volume.meta in one pass, without encoding/json's
// reflection, and only in the plain form the engine writes: one JSON
// object, each of VolumeMeta's keys at most once and spelled exactly so
// (every key of v0.1.0 present, not both backing-file keys), Size and
// SectorSize unsigned integers without sign, exponent or fraction that fit
// in an int64, booleans true or false, strings of printable ASCII without
// escapes (Head "" or a plain name), and other keys (printable ASCII,
// escape-free, not equal to a field's name but for case, each at most
// once, at most four of them) with a null,
// boolean, such a string or such an integer as value; JSON whitespace
// between tokens and around the object.
//
// ok is false for anything else, and then it says nothing:
// ParseVolumeMeta leaves such an input to parseVolumeMetaRef, which
// decides it and says what is wrong. What it accepts the reference reads
// to the same VolumeMeta without error (FuzzParseVolumeMetaMatchesReference
// compares them).
func parseMetaFast(data []byte) (m VolumeMeta, ok bool) {
	p := metaScanner{data: data}
	p.space()
	if !p.byte('{') {
		return VolumeMeta{}, false
	}
	var seen uint16
	// The keys of no release met so far (slices of data), to decline a
	// duplicate, which the reference refuses; a file with more than
	// len(other) of them is left to the reference.
	var other [4][]byte
	nOther := 0
	p.space()
	if p.peek() == '}' {
		return VolumeMeta{}, false // {} lacks every key
	}
	for {
		p.space()
		key, ok := p.str()
		if !ok {
			return VolumeMeta{}, false
		}
		p.space()
		if !p.byte(':') {
			return VolumeMeta{}, false
		}
		p.space()
		field := metaField(key)
		switch {
		case field == -2:
			return VolumeMeta{}, false
		case field < 0:
			if nOther == len(other) {
				return VolumeMeta{}, false
			}
			for _, k := range other[:nOther] {
				if string(k) == string(key) {
					return VolumeMeta{}, false // a duplicate
				}
			}
			other[nOther] = key
			nOther++
			if !p.skipPlainValue() {
				return VolumeMeta{}, false
			}
		default:
			if seen&(1<<field) != 0 {
				return VolumeMeta{}, false // a duplicate: json's last one wins
			}
			seen |= 1 << field
			if !p.fieldValue(&m, field) {
				return VolumeMeta{}, false
			}
		}
		p.space()
		switch p.next() {
		case ',':
			continue
		case '}':
		default:
			return VolumeMeta{}, false
		}
		break
	}
	p.space()
	if p.i != len(p.data) || seen&metaRequired != metaRequired {
		return VolumeMeta{}, false
	}
	if seen&(1<<fBackingFileName) != 0 && seen&(1<<fBackingFilePath) != 0 {
		return VolumeMeta{}, false // the reference refuses both
	}
	if m.Head != "" && !PlainName(m.Head) {
		return VolumeMeta{}, false // the reference refuses a path
	}
	m.Format = formatOf(seen)
	return m, true
}

// metaField returns the index of the field key names exactly, -1 for a
// key that matches no field even without regard to case, and -2 for one
// that matches a field only without regard to case (encoding/json would
// fill the field from it: not plain).
func metaField(key []byte) int {
	for i, f := range metaFields {
		if len(f) != len(key) {
			continue
		}
		if string(key) == f {
			return i
		}
		if equalFoldASCII(key, f) {
			return -2
		}
	}
	return -1
}

// equalFoldASCII reports whether a and b are equal without regard to
// ASCII case; both are ASCII here.
func equalFoldASCII(a []byte, b string) bool {
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// metaScanner walks data; every method stops at its end without panicking.
type metaScanner struct {
	data []byte
	i    int
}

func (p *metaScanner) peek() byte {
	if p.i < len(p.data) {
		return p.data[p.i]
	}
	return 0
}

func (p *metaScanner) next() byte {
	c := p.peek()
	if p.i < len(p.data) {
		p.i++
	}
	return c
}

func (p *metaScanner) byte(c byte) bool {
	if p.peek() == c && p.i < len(p.data) {
		p.i++
		return true
	}
	return false
}

// space skips JSON whitespace.
func (p *metaScanner) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// str reads a string of printable ASCII without escapes and returns its
// bytes (a slice of data).
func (p *metaScanner) str() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			return p.data[start : p.i-1], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// uint reads an unsigned integer without leading zeros that fits in an
// int64.
func (p *metaScanner) uint() (int64, bool) {
	start := p.i
	var v int64
	for p.i < len(p.data) {
		c := p.data[p.i]
		if c < '0' || c > '9' {
			break
		}
		d := int64(c - '0')
		if v > (1<<63-1-d)/10 {
			return 0, false // overflows an int64
		}
		v = v*10 + d
		p.i++
	}
	n := p.i - start
	if n == 0 || n > 1 && p.data[start] == '0' {
		return 0, false
	}
	return v, p.delimited()
}

// delimited reports whether a literal ends here: at whitespace, a comma
// or the object's end (else it goes on as something not plain, like 1.5,
// 1e3 or truex).
func (p *metaScanner) delimited() bool {
	switch p.peek() {
	case ' ', '\t', '\n', '\r', ',', '}':
		return true
	}
	return false
}

// word reads the literal w.
func (p *metaScanner) word(w string) bool {
	if len(p.data)-p.i < len(w) || string(p.data[p.i:p.i+len(w)]) != w {
		return false
	}
	p.i += len(w)
	return p.delimited()
}

// boolean reads true or false.
func (p *metaScanner) boolean() (v, ok bool) {
	switch p.peek() {
	case 't':
		return true, p.word("true")
	case 'f':
		return false, p.word("false")
	}
	return false, false
}

// skipPlainValue skips the value of a key that is no field: null, a
// boolean, a plain string or a plain integer.
func (p *metaScanner) skipPlainValue() bool {
	switch c := p.peek(); {
	case c == 'n':
		return p.word("null")
	case c == 't' || c == 'f':
		_, ok := p.boolean()
		return ok
	case c == '"':
		_, ok := p.str()
		return ok
	case '0' <= c && c <= '9':
		_, ok := p.uint()
		return ok
	}
	return false
}

// fieldValue reads field's value into m.
func (p *metaScanner) fieldValue(m *VolumeMeta, field int) bool {
	switch field {
	case fSize, fSectorSize:
		v, ok := p.uint()
		if field == fSize {
			m.Size = v
		} else {
			m.SectorSize = v
		}
		return ok
	case fDirty, fRebuilding, fEncrypted:
		v, ok := p.boolean()
		switch field {
		case fDirty:
			m.Dirty = v
		case fRebuilding:
			m.Rebuilding = v
		default:
			m.Encrypted = v
		}
		return ok
	}
	b, ok := p.str()
	if !ok {
		return false
	}
	s := string(b) // a copy: data is a reused buffer
	switch field {
	case fHead:
		m.Head = s
	case fError:
		m.Error = s
	case fParent:
		m.Parent = s
	default: // BackingFilePath, or BackingFileName it was renamed from
		m.BackingFilePath = s
	}
	return true
}
