package tokenring

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// endpointNames numbers endpoints so the hot loops compare int32s.
type endpointNames struct {
	ids  map[string]int32
	list []string
}

func (n *endpointNames) id(name string) int32 {
	if id, ok := n.ids[name]; ok {
		return id
	}
	id := int32(len(n.list))
	n.ids[name] = id
	n.list = append(n.list, name)
	return id
}

// compiledRing is a Ring sorted and numbered for the walks.
type compiledRing struct {
	tokens   []Token
	owner    []int32 // endpoint id per token
	members  []int32 // distinct endpoint ids, in id order
	isMember []bool  // by endpoint id; sized when the analysis has all ids
	// locations by endpoint name, for NetworkTopologyStrategy
	locations map[string]Location
	names     *endpointNames
}

func compileRing(r Ring, names *endpointNames) (compiledRing, error) {
	// Sort pointer-free tokens and endpoint ids: sorting the caller's
	// TokenOwners (with their strings) costs several times more, most of
	// it in the garbage collector.
	c := compiledRing{
		tokens:    make([]Token, len(r.Owners)),
		owner:     make([]int32, len(r.Owners)),
		locations: r.Locations,
		names:     names,
	}
	in := interner{names: names}
	dup, err := sortByToken(r.Owners, &in, c.tokens, c.owner)
	if err != nil {
		return compiledRing{}, err
	}
	if dup {
		for i := 1; i < len(c.tokens); i++ {
			if c.tokens[i-1] == c.tokens[i] {
				return compiledRing{}, fmt.Errorf("%w: token %v owned twice (%q and %q)",
					ErrInvalidRing, c.tokens[i], names.list[c.owner[i-1]], names.list[c.owner[i]])
			}
		}
	}
	for id, member := range in.isMember {
		if member {
			c.members = append(c.members, int32(id))
		}
	}
	return c, nil
}

// interner numbers one ring's endpoints and notes which ids it has.
type interner struct {
	names    *endpointNames
	lastName string
	last     int32
	isMember []bool // by endpoint id
}

// id numbers a non-empty name. Rings often list a node's vnodes together:
// comparing with the previous name (often the very same string) saves a
// map look-up.
func (in *interner) id(name string) int32 {
	if name == in.lastName {
		return in.last
	}
	return in.lookUp(name)
}

// lookUp is id's slow path; kept out of line so that id inlines.
//
//go:noinline
func (in *interner) lookUp(name string) int32 {
	id := in.names.id(name)
	for int(id) >= len(in.isMember) {
		in.isMember = append(in.isMember, false)
	}
	in.isMember[id] = true
	in.lastName, in.last = name, id
	return id
}

func errNoEndpoint(t Token) error {
	return fmt.Errorf("%w: token %v has no endpoint", ErrInvalidRing, t)
}

// sortByToken writes the owners' tokens and their endpoint ids into tokens
// and owner, in token order, stably: owners with equal tokens keep their
// order, so a duplicate is reported the same way whatever path sorted it.
// It reports whether two owners have the same token, and refuses an empty
// endpoint (the first in the owners' order).
//
// Ring tokens are spread uniformly (ScyllaDB draws them at random or
// splits ranges evenly), so one counting pass on the top bits puts every
// token within a few places of its final one, and an insertion sort
// finishes the job in about one more pass: two passes where a comparison
// sort needs log n and a byte-wise radix sort eight. A ring whose tokens
// crowd into a few buckets (a test ring, a hand-made one) takes the
// byte-wise radix sort instead, so the insertion sort never goes quadratic.
func sortByToken(owners []TokenOwner, in *interner, tokens []Token, owner []int32) (dup bool, err error) {
	n := len(owners)
	if n < 256 || n > math.MaxInt32 {
		return sortPairs(owners, in, tokens, owner)
	}
	// About four tokens per bucket; at most 2^16 buckets (and int32
	// counts) keep the counts in cache.
	shift := 64 - min(bits.Len(uint(n))-3, 16)
	count := make([]int32, 1<<(64-shift))
	for _, o := range owners {
		if o.Endpoint == "" {
			return false, errNoEndpoint(o.Token)
		}
		count[tokenKey(o.Token)>>shift]++
	}
	pos := int32(0)
	for b, k := range count {
		if k > maxBucket {
			return sortPairs(owners, in, tokens, owner)
		}
		count[b] = pos
		pos += k
	}
	for _, o := range owners {
		b := tokenKey(o.Token) >> shift
		p := count[b]
		count[b]++
		tokens[p], owner[p] = o.Token, in.id(o.Endpoint)
	}
	// Every token is now in its bucket, and buckets are in order: the
	// insertion sort moves tokens only within a bucket, at most maxBucket
	// places each. Equal tokens end up side by side, so each meets its
	// twin as it lands.
	for i := 1; i < n; i++ {
		t := tokens[i]
		if t >= tokens[i-1] {
			dup = dup || t == tokens[i-1]
			continue
		}
		o := owner[i]
		j := i
		for j > 0 && tokens[j-1] > t {
			tokens[j], owner[j] = tokens[j-1], owner[j-1]
			j--
		}
		tokens[j], owner[j] = t, o
		dup = dup || j > 0 && tokens[j-1] == t
	}
	return dup, nil
}

// maxBucket bounds the insertion sort's work per token.
const maxBucket = 64

// tokenKey maps signed token order to unsigned order.
func tokenKey(t Token) uint64 { return uint64(t) ^ 1<<63 }

// sortPairs is the general path of sortByToken.
func sortPairs(owners []TokenOwner, in *interner, tokens []Token, owner []int32) (dup bool, err error) {
	pairs := make([]ownedToken, len(owners))
	for i, o := range owners {
		if o.Endpoint == "" {
			return false, errNoEndpoint(o.Token)
		}
		pairs[i] = ownedToken{token: o.Token, owner: in.id(o.Endpoint)}
	}
	radixSortByToken(pairs)
	for i, p := range pairs {
		tokens[i], owner[i] = p.token, p.owner
		dup = dup || i > 0 && tokens[i-1] == p.token
	}
	return dup, nil
}

type ownedToken struct {
	token Token
	owner int32
}

// radixSortByToken is a stable LSD radix sort on the token, a byte per
// pass, skipping passes where every key has the same byte. Its running
// time does not depend on how the tokens are spread.
func radixSortByToken(pairs []ownedToken) {
	if len(pairs) < 256 {
		slices.SortStableFunc(pairs, func(x, y ownedToken) int { return cmp.Compare(x.token, y.token) })
		return
	}
	src, dst := pairs, make([]ownedToken, len(pairs))
	for shift := uint(0); shift < 64; shift += 8 {
		var count [256]int
		for _, p := range src {
			count[byte(tokenKey(p.token)>>shift)]++
		}
		if count[byte(tokenKey(src[0].token)>>shift)] == len(src) {
			continue
		}
		pos := 0
		for b, n := range count {
			count[b] = pos
			pos += n
		}
		for _, p := range src {
			b := byte(tokenKey(p.token) >> shift)
			dst[count[b]] = p
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &pairs[0] {
		copy(pairs, src)
	}
}

// finish sizes isMember once every endpoint of both rings has an id.
func (c *compiledRing) finish() {
	if len(c.isMember) == len(c.names.list) {
		return
	}
	c.isMember = make([]bool, len(c.names.list))
	for _, id := range c.members {
		c.isMember[id] = true
	}
}
