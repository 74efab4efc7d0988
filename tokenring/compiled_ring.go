package tokenring

import (
	"cmp"
	"fmt"
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
	// Number the endpoints first and sort pointer-free (token, id) pairs:
	// sorting the caller's TokenOwners (with their strings) costs several
	// times more, most of it in the garbage collector.
	pairs := make([]ownedToken, len(r.Owners))
	for i, o := range r.Owners {
		if o.Endpoint == "" {
			return compiledRing{}, fmt.Errorf("%w: token %v has no endpoint", ErrInvalidRing, o.Token)
		}
		pairs[i] = ownedToken{token: o.Token, owner: names.id(o.Endpoint)}
	}
	radixSortByToken(pairs)
	c := compiledRing{
		tokens:    make([]Token, len(pairs)),
		owner:     make([]int32, len(pairs)),
		locations: r.Locations,
		names:     names,
	}
	seen := map[int32]bool{}
	for i, p := range pairs {
		if i > 0 && pairs[i-1].token == p.token {
			return compiledRing{}, fmt.Errorf("%w: token %v owned twice (%q and %q)",
				ErrInvalidRing, p.token, names.list[pairs[i-1].owner], names.list[p.owner])
		}
		c.tokens[i], c.owner[i] = p.token, p.owner
		if !seen[p.owner] {
			seen[p.owner] = true
			c.members = append(c.members, p.owner)
		}
	}
	slices.Sort(c.members)
	return c, nil
}

type ownedToken struct {
	token Token
	owner int32
}

// radixSortByToken is a stable LSD radix sort on the token, a byte per
// pass, skipping passes where every key has the same byte. Rings are large
// and their tokens uniformly random, which is radix sort's best case.
func radixSortByToken(pairs []ownedToken) {
	if len(pairs) < 256 {
		slices.SortStableFunc(pairs, func(x, y ownedToken) int { return cmp.Compare(x.token, y.token) })
		return
	}
	key := func(t Token) uint64 { return uint64(t) ^ 1<<63 } // signed order as unsigned
	src, dst := pairs, make([]ownedToken, len(pairs))
	for shift := uint(0); shift < 64; shift += 8 {
		var count [256]int
		for _, p := range src {
			count[byte(key(p.token)>>shift)]++
		}
		if count[byte(key(src[0].token)>>shift)] == len(src) {
			continue
		}
		pos := 0
		for b, n := range count {
			count[b] = pos
			pos += n
		}
		for _, p := range src {
			b := byte(key(p.token) >> shift)
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
