package tokenring

import (
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// TestHashJSONMatchesOperatorVector checks the construction (json.Encoder
// into SHA-512, standard base64) against the vector scylla-operator's own
// test publishes for its hash helper (pkg/util/hash/hash_test.go).
func TestHashJSONMatchesOperatorVector(t *testing.T) {
	const want = "9jhCVR1KXrirK3/lDCjEA1x5bXnHBpGIU1z7hgkLd1JAUDJnfOyIqw22zvXMZvvI62Ngr0xFSvyw+B9ifT4Lfg=="
	got, err := hashJSON(map[string]string{"key_2": "val_2", "key_1": "val_1"})
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("hashJSON = %s, want the operator's %s", got, want)
	}
}

// TestHashTokensByConstruction rebuilds the annotation value from the exact
// bytes the operator hashes: the JSON array and the encoder's newline.
func TestHashTokensByConstruction(t *testing.T) {
	for _, tc := range []struct {
		tokens []string
		bytes  string
	}{
		{[]string{"-9223372036854775807", "-3", "0", "42"}, `["-9223372036854775807","-3","0","42"]` + "\n"},
		{[]string{}, "[]\n"},
		{nil, "null\n"},
		{[]string{"<&>"}, `["\u003c\u0026\u003e"]` + "\n"}, // the Encoder escapes HTML
	} {
		sum := sha512.Sum512([]byte(tc.bytes))
		want := base64.StdEncoding.EncodeToString(sum[:])
		if got := HashTokens(tc.tokens); got != want {
			t.Errorf("HashTokens(%q) = %s, want %s (sha512 of %q)", tc.tokens, got, want, tc.bytes)
		}
		if !validHash(HashTokens(tc.tokens)) {
			t.Errorf("validHash rejects HashTokens(%q)", tc.tokens)
		}
	}
}

func TestHashTokensOrderAndSpellingMatter(t *testing.T) {
	a := HashTokens([]string{"1", "2"})
	if a == HashTokens([]string{"2", "1"}) {
		t.Error("order does not change the hash")
	}
	if a == HashTokens([]string{"1", "02"}) {
		t.Error("spelling does not change the hash")
	}
}

func TestValidHash(t *testing.T) {
	good := HashTokens([]string{"1"})
	for _, s := range []string{"", NeverCleanedUp, good[:len(good)-1], strings.Repeat("!", len(good)), "abc"} {
		if validHash(s) {
			t.Errorf("validHash(%q) = true", s)
		}
	}
}

func TestParseToken(t *testing.T) {
	for s, want := range map[string]Token{
		"0": 0, "1": 1, "-1": -1, "9223372036854775807": 1<<63 - 1, "-9223372036854775808": -1 << 63,
	} {
		got, err := ParseToken(s)
		if err != nil || got != want {
			t.Errorf("ParseToken(%q) = %v, %v; want %v", s, got, err, want)
		}
		if got.String() != s {
			t.Errorf("Token(%v).String() = %q, want %q", got, got.String(), s)
		}
	}
	for _, s := range []string{
		"", "-", "+1", " 1", "1 ", "01", "-0", "00", "1e3", "0x10", "abc",
		"9223372036854775808",                     // int64 overflow
		"170141183460469231731687303715884105727", // RandomPartitioner
		"6b6579", // ByteOrderedPartitioner
		strings.Repeat("9", 10000),
	} {
		_, err := ParseToken(s)
		var te *TokenError
		if !errors.Is(err, ErrNotMurmur3) || !errors.As(err, &te) {
			t.Errorf("ParseToken(%q) error = %v, want a *TokenError wrapping ErrNotMurmur3", s, err)
			continue
		}
		if len(te.Token) > 43 {
			t.Errorf("ParseToken(%q): error repeats %d bytes of input", s[:10], len(te.Token))
		}
	}
}

func TestParseTokensNamesTheIndex(t *testing.T) {
	_, err := ParseTokens([]string{"1", "2", "x"})
	if !errors.Is(err, ErrNotMurmur3) || !strings.Contains(err.Error(), "token 2") {
		t.Fatalf("error = %v", err)
	}
}

// FuzzParseToken: never panics, accepts exactly the canonical spelling of
// an int64, and round-trips.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"0", "-1", "9223372036854775807", "-9223372036854775808", "01", "-0", "+5", "1e9", "", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			if !errors.Is(err, ErrNotMurmur3) {
				t.Fatalf("ParseToken(%q) = %v, not an ErrNotMurmur3", s, err)
			}
			return
		}
		if tok.String() != s {
			t.Fatalf("ParseToken(%q) accepted a non-canonical token (round trip %q)", s, tok.String())
		}
	})
}
