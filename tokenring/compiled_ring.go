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
	// Number the endpoints first and sort pointer-free tokens and ids:
	// sorting the caller's TokenOwners (with their strings) costs several
	// times more, most of it in the garbage collector.
	ids := make([]int32, len(r.Owners))
	last := int32(-1)
	for i, o := range r.Owners {
		if o.Endpoint == "" {
			return compiledRing{}, fmt.Errorf("%w: token %v has no endpoint", ErrInvalidRing, o.Token)
		}
		// Rings often list a node's vnodes together: comparing with the
		// previous name (often the very same string) saves a map look-up.
		if last < 0 || o.Endpoint != names.list[last] {
			last = names.id(o.Endpoint)
		}
		ids[i] = last
	}
	c := compiledRing{
		tokens:    make([]Token, len(r.Owners)),
		owner:     make([]int32, len(r.Owners)),
		locations: r.Locations,
		names:     names,
	}
	sortByToken(r.Owners, ids, c.tokens, c.owner)
	seen := make([]bool, len(names.list))
	for i, tok := range c.tokens {
		if i > 0 && c.tokens[i-1] == tok {
			return compiledRing{}, fmt.Errorf("%w: token %v owned twice (%q and %q)",
				ErrInvalidRing, tok, names.list[c.owner[i-1]], names.list[c.owner[i]])
		}
		seen[c.owner[i]] = true
	}
	for id, s := range seen {
		if s {
			c.members = append(c.members, int32(id))
		}
	}
	return c, nil
}

// sortByToken writes the owners' tokens and their endpoint ids (ids[i] is
// owners[i]'s) into tokens and owner, in token order, stably: owners with
// equal tokens keep their order, so a duplicate is reported the same way
// whatever path sorted it.
//
// Ring tokens are spread uniformly (ScyllaDB draws them at random or
// splits ranges evenly), so one counting pass on the top bits puts every
// token within a few places of its final one, and an insertion sort
// finishes the job in about one more pass: two passes where a comparison
// sort needs log n and a byte-wise radix sort eight. A ring whose tokens
// crowd into a few buckets (a test ring, a hand-made one) takes the
// byte-wise radix sort instead, so the insertion sort never goes quadratic.
func sortByToken(owners []TokenOwner, ids []int32, tokens []Token, owner []int32) {
	n := len(owners)
	if n < 256 || n > math.MaxInt32 {
		sortPairs(owners, ids, tokens, owner)
		return
	}
	// About four tokens per bucket; at most 2^16 buckets (and int32
	// counts) keep the counts in cache.
	shift := 64 - min(bits.Len(uint(n))-3, 16)
	count := make([]int32, 1<<(64-shift))
	for _, o := range owners {
		count[tokenKey(o.Token)>>shift]++
	}
	pos := int32(0)
	for b, k := range count {
		if k > maxBucket {
			sortPairs(owners, ids, tokens, owner)
			return
		}
		count[b] = pos
		pos += k
	}
	for i, o := range owners {
		b := tokenKey(o.Token) >> shift
		p := count[b]
		count[b]++
		tokens[p], owner[p] = o.Token, ids[i]
	}
	// Every token is now in its bucket, and buckets are in order: the
	// insertion sort moves tokens only within a bucket, at most maxBucket
	// places each.
	for i := 1; i < n; i++ {
		t := tokens[i]
		if t >= tokens[i-1] {
			continue
		}
		o := owner[i]
		j := i
		for j > 0 && tokens[j-1] > t {
			tokens[j], owner[j] = tokens[j-1], owner[j-1]
			j--
		}
		tokens[j], owner[j] = t, o
	}
}

// maxBucket bounds the insertion sort's work per token.
const maxBucket = 64

// tokenKey maps signed token order to unsigned order.
func tokenKey(t Token) uint64 { return uint64(t) ^ 1<<63 }

// sortPairs is the general path of sortByToken.
func sortPairs(owners []TokenOwner, ids []int32, tokens []Token, owner []int32) {
	pairs := make([]ownedToken, len(owners))
	for i, o := range owners {
		pairs[i] = ownedToken{token: o.Token, owner: ids[i]}
	}
	radixSortByToken(pairs)
	for i, p := range pairs {
		tokens[i], owner[i] = p.token, p.owner
	}
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
