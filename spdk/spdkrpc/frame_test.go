package spdkrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// frames reads every reply the framer finds in data, in reads of the
// size r gives, and the error that ended it.
func frames(r io.Reader, limit int64) ([]string, error) {
	f := newFramer(r, limit)
	var out []string
	for {
		v, err := f.next(true)
		if err != nil {
			return out, err
		}
		if want := membersByScan(v); !slices.Equal(f.members, want) {
			return out, fmt.Errorf("members of %q: framer %v, scan %v", v, f.members, want)
		}
		out = append(out, string(v))
	}
}

// membersByScan finds the members of a valid JSON object in a second
// pass, the reference for the members the framer records as it scans.
func membersByScan(raw []byte) []member {
	var out []member
	i := skipSpace(raw, 0) + 1
	i = skipSpace(raw, i)
	for i < len(raw) && raw[i] != '}' {
		if raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
		var m member
		m.keyStart = i
		m.keyEnd = skipValue(raw, i)
		i = skipSpace(raw, skipSpace(raw, m.keyEnd)+1)
		m.valStart = i
		m.valEnd = skipValue(raw, i)
		out = append(out, m)
		i = skipSpace(raw, m.valEnd)
	}
	return out
}

// FuzzFramer holds the framer to encoding/json's Decoder, the reference:
// on a stream of JSON objects, both cut the same values in the same
// places; where the Decoder finds a syntax error or a truncated value, the
// framer fails with a *ProtocolError, never with a value; and the framer
// finds the same values whether the stream arrives in one read or one
// byte at a time (its scan resumes across reads), and the members it
// records as it scans are those a second pass finds.
func FuzzFramer(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":true}` + "\n",
		`{"a":[1,-0.5e+3,"x\"y\\u00e9",{"b":null,"c":false}]} {"d":{}}`,
		`{"a":01}`, `{"a":1.}`, `{"a":"\x01"}`, `{"a":tru}`, `{"a":[}`, `{"a" 1}`, `{,}`,
		`{"a":"\ud800"}{`, `[1]`, `"x"`, `  {} `, `{"a":1e}`, `{"a":-}`, `{"a":"\q"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := frames(bytes.NewReader(data), 1<<20)
		slow, slowErr := frames(iotest.OneByteReader(bytes.NewReader(data)), 1<<20)
		if strings.Join(got, "\x00") != strings.Join(slow, "\x00") || (err == nil) != (slowErr == nil) {
			t.Fatalf("one read: %q, %v; byte by byte: %q, %v", got, err, slow, slowErr)
		}
		if err == nil {
			t.Fatal("the framer ended without an error")
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		for i := 0; ; i++ {
			var raw json.RawMessage
			derr := dec.Decode(&raw)
			if derr != nil {
				if i < len(got) {
					t.Fatalf("value %d: the framer found %q where the decoder failed: %v", i, got[i], derr)
				}
				if errors.Is(derr, io.EOF) && !errors.Is(err, ErrConnection) {
					t.Fatalf("clean end of stream: %v", err)
				}
				var pe *ProtocolError
				if !errors.Is(derr, io.EOF) && !errors.As(err, &pe) {
					t.Fatalf("decoder: %v; framer: %v, want a *ProtocolError", derr, err)
				}
				return
			}
			if raw[0] != '{' {
				var pe *ProtocolError
				if i != len(got) || !errors.As(err, &pe) {
					t.Fatalf("value %d is %q, not an object: framer %q, %v", i, raw, got, err)
				}
				return
			}
			if i >= len(got) {
				t.Fatalf("value %d: the decoder found %q, the framer failed: %v", i, raw, err)
			}
			if got[i] != string(raw) {
				t.Fatalf("value %d: framer %q, decoder %q", i, got[i], raw)
			}
		}
	})
}

func TestFramerBuffersLargeRepliesAndShrinks(t *testing.T) {
	big := `{"result":"` + strings.Repeat("x", 3<<20) + `"}`
	stream := big + "\n" + `{"id":1}`
	f := newFramer(strings.NewReader(stream), 4<<20)
	v, err := f.next(true)
	if err != nil || string(v) != big {
		t.Fatalf("large reply: %d bytes, %v", len(v), err)
	}
	if v, err := f.next(true); err != nil || string(v) != `{"id":1}` {
		t.Fatalf("next reply: %q, %v", v, err)
	}
	if _, err := f.next(true); !errors.Is(err, ErrConnection) {
		t.Fatalf("end of stream: %v", err)
	}
	if cap(f.buf) != framerMinBuf {
		t.Fatalf("the buffer kept %d bytes after the large reply", cap(f.buf))
	}
}
