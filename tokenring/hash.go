package tokenring

import (
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
)

// HashTokens returns the token ring hash that scylla-operator's sidecar puts
// in the CurrentTokenRingHashAnnotation: SHA-512 over the output of Go's
// json.Encoder for the token strings exactly as GET /storage_service/tokens
// returned them (including the encoder's trailing newline), in standard
// base64 with padding.
//
// Pass the strings unparsed and unsorted: any change of order or spelling
// changes the hash, and compatibility is the point. A nil slice hashes as
// JSON null and an empty one as [], again as the encoder would.
func HashTokens(tokens []string) string {
	// json.Encoder cannot fail on a []string and hash writes never fail,
	// so the error of the general function is always nil here.
	sum, _ := hashJSON(tokens)
	return sum
}

// hashJSON is the general construction (scylla-operator uses it for other
// objects too); the tests check it against a vector the operator publishes.
func hashJSON(v any) (string, error) {
	h := sha512.New()
	if err := json.NewEncoder(h).Encode(v); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

// hashLen is the length of a base64-encoded SHA-512 digest.
var hashLen = base64.StdEncoding.EncodedLen(sha512.Size)

// validHash reports whether s looks like a value HashTokens could produce.
func validHash(s string) bool {
	if len(s) != hashLen {
		return false
	}
	b, err := base64.StdEncoding.DecodeString(s)
	return err == nil && len(b) == sha512.Size
}
