package diskscan

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/caretaker-storage/caretaker/internal/bounded"
)

// DefaultMaxReplicaListSize bounds ParseReplicaList when its limit is 0.
const DefaultMaxReplicaListSize = 256 << 20

// ParseReplicaList reads the JSON `kubectl get replicas.longhorn.io -o
// json` prints: an object whose "items" is an array of replica objects.
// It keeps metadata.name and spec.{nodeID,diskID,diskPath,dataDirectoryName}
// of each and ignores everything else. It reads at most limit bytes
// (DefaultMaxReplicaListSize if limit <= 0) and decodes one item at a time.
// Errors are *ParseError wrapping ErrCorrupt or ErrTooLarge (a
// *bounded.TooLargeError); on error no
// refs are returned, so a truncated list never looks like "nothing is
// expected".
func ParseReplicaList(r io.Reader, limit int64) (_ []ReplicaRef, err error) {
	defer withPrefix(&err)
	const input = "replica list"
	limit = orDefault(limit, DefaultMaxReplicaListSize)
	br := &bounded.Reader{R: r, Limit: limit, What: input}
	fail := func(err error) ([]ReplicaRef, error) {
		var tl *bounded.TooLargeError
		if errors.As(err, &tl) {
			return nil, tooLarge(tl)
		}
		if br.Count() > limit {
			return nil, tooLarge(&bounded.TooLargeError{What: input, Limit: limit})
		}
		var pe *ParseError
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, corrupt(input, "%v", err)
	}
	dec := json.NewDecoder(br)
	if err := expectDelim(dec, '{'); err != nil {
		return fail(err)
	}
	var refs []ReplicaRef
	sawItems := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		key, _ := tok.(string)
		if key != "items" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fail(err)
			}
			continue
		}
		if sawItems {
			return fail(corrupt(input, "two \"items\" keys"))
		}
		sawItems = true
		if err := expectDelim(dec, '['); err != nil {
			return fail(fmt.Errorf("items: %w", err))
		}
		for i := 0; dec.More(); i++ {
			var item struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Spec *struct {
					NodeID            string `json:"nodeID"`
					DiskID            string `json:"diskID"`
					DiskPath          string `json:"diskPath"`
					DataDirectoryName string `json:"dataDirectoryName"`
				} `json:"spec"`
			}
			if err := dec.Decode(&item); err != nil {
				return fail(fmt.Errorf("items[%d]: %w", i, err))
			}
			if item.Spec == nil {
				return fail(corrupt(input, "items[%d] (%q) has no spec", i, item.Metadata.Name))
			}
			refs = append(refs, ReplicaRef{
				Name: item.Metadata.Name, NodeID: item.Spec.NodeID, DiskID: item.Spec.DiskID,
				DiskPath: item.Spec.DiskPath, DataDirectoryName: item.Spec.DataDirectoryName,
			})
		}
		if err := expectDelim(dec, ']'); err != nil {
			return fail(err)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return fail(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fail(fmt.Errorf("data after the list"))
	}
	if br.Count() > limit {
		return fail(nil)
	}
	if !sawItems {
		return fail(corrupt(input, "no \"items\" key: not a list"))
	}
	if refs == nil {
		refs = []ReplicaRef{}
	}
	return refs, nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("expected %q, found %v", want, tok)
	}
	return nil
}
