package tokenring

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// Token is a Murmur3Partitioner token: a signed 64-bit position on the ring.
// The ring wraps: the range after the largest token continues at the smallest.
type Token int64

// String returns the token in the decimal form ScyllaDB's REST API uses.
func (t Token) String() string { return strconv.FormatInt(int64(t), 10) }

// ErrNotMurmur3 is wrapped by every *TokenError: the text is not a token of
// the Murmur3 partitioner (RandomPartitioner tokens overflow 64 bits,
// ByteOrderedPartitioner tokens are hex, and anything else is garbage).
var ErrNotMurmur3 = errors.New("tokenring: not a Murmur3 token")

// TokenError names a token that could not be parsed and why.
type TokenError struct {
	Token  string // the offending text, shortened to 40 bytes
	Reason string
}

// Error implements error.
func (e *TokenError) Error() string {
	return fmt.Sprintf("%v: %q: %s", ErrNotMurmur3, e.Token, e.Reason)
}

// Unwrap makes errors.Is(err, ErrNotMurmur3) true.
func (e *TokenError) Unwrap() error { return ErrNotMurmur3 }

// maxTokenLen is the length of the longest canonical int64, "-9223372036854775808".
const maxTokenLen = 20

// ParseToken parses one token exactly as ScyllaDB prints it: an optional
// minus sign and decimal digits without leading zeros, within int64. Anything
// else (spaces, a plus sign, "-0", leading zeros, hex, 128-bit values) is a
// *TokenError: a non-canonical token would not survive a round trip, so the
// hash and the ring built from it would silently disagree.
func ParseToken(s string) (Token, error) {
	if s == "" {
		return 0, tokenError(s, "empty")
	}
	if len(s) > maxTokenLen {
		return 0, tokenError(s, fmt.Sprintf("%d characters, longer than any 64-bit token (another partitioner?)", len(s)))
	}
	digits := s
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if digits == "" {
		return 0, tokenError(s, "a sign without digits")
	}
	for i := 0; i < len(digits); i++ {
		if c := digits[i]; c < '0' || c > '9' {
			return 0, tokenError(s, fmt.Sprintf("unexpected character %q at offset %d", c, len(s)-len(digits)+i))
		}
	}
	if digits[0] == '0' && (len(digits) > 1 || len(s) > 1) {
		return 0, tokenError(s, "not canonical (leading zero or negative zero)")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, tokenError(s, "outside the signed 64-bit range (RandomPartitioner?)")
	}
	return Token(v), nil
}

// ParseTokens parses every token of a REST reply; the first bad one is
// reported with its index.
func ParseTokens(texts []string) ([]Token, error) {
	tokens := make([]Token, len(texts))
	for i, s := range texts {
		t, err := ParseToken(s)
		if err != nil {
			return nil, errclass.Wrapf("tokenring", err, "token %d", i)
		}
		tokens[i] = t
	}
	return tokens, nil
}

func tokenError(s, reason string) *TokenError {
	const keep = 40
	if len(s) > keep {
		s = s[:keep] + "..."
	}
	return &TokenError{Token: s, Reason: reason}
}
