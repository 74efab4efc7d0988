package diskscan

import (
	"context"
	"hash/maphash"
	"io/fs"
	"slices"
	"strings"
	"unsafe"

	"github.com/caretaker-storage/caretaker/orphan"
)

// What a scan remembers of a disk's replicas directory, and why it may
// skip work next time. None of it is trusted by Judge or Delete, which
// look at the disk and ask the ExpectedSource themselves: the cache only
// shapes reports.
//
//   - The listing: the names and what each was (a directory with a valid
//     name, or an entry skipped whatever the cluster expects, with why).
//     It is reused while <disk>/replicas keeps the stamp it had when it was
//     listed (inode, mtime, ctime, link count, size; see dirStamp) and that
//     stamp was outside RacyWindow of the scan that listed it: creating,
//     removing or renaming an entry, or replacing one by a symbolic link,
//     changes the directory's mtime and ctime, so an unchanged stamp means
//     the same entries of the same types. The window covers timestamps too
//     coarse to tell apart a change made in the tick of the listing.
//   - The classification: which valid directories the expected set claims.
//     It is reused while the source hands out the same set (a source never
//     modifies a set it handed out) or a set with the same content, which
//     a keyed digest of its names tells at the cost of hashing them
//     (cheaper than looking up every name on disk; see setDigest).
//   - The validation of each unexpected directory (cachedEntry), reused
//     while its own identity is unchanged; unexpected directories are
//     lstat'ed on every scan.

// diskCache is what scans remember of one disk between scans.
type diskCache struct {
	path, uuid string
	entries    map[string]*cachedEntry // validated unexpected directories, by name

	// The last listing, in the kernel's order, and the stamp of the
	// directory just before it was read. trusted: the stamp was outside
	// RacyWindow, so the listing stands while the stamp does.
	stamp      dirStamp
	trusted    bool
	names      []string
	flags      []uint8          // entryValid, entryOwned
	static     []orphan.Skipped // entries skipped whatever the set, sorted by name
	tombstones int              // caretaker tombstones and markers among them

	// The set flags were classified against, and what follows from it.
	set        NameSet
	classified bool
	prints     setPrints // of set, as far as computed
	owned      int
	candidates []int32  // valid directories the set does not claim
	ownedNames []string // sorted, with Options.ListOwned

	types      []fs.FileMode // as listed; kept to reuse the buffer
	spareNames []string      // the buffers of the listing before, reused
	spareFlags []uint8
	spareTypes []fs.FileMode
}

const (
	entryValid uint8 = 1 << iota // a directory with a valid data name
	entryOwned                   // ...that the set claims
)

// cachedEntry is the validation of one unexpected directory, valid while
// the directory's identity is unchanged.
type cachedEntry struct {
	id        dirIdentity
	reason    string // why it is not a replica; "" if it is
	meta      VolumeMeta
	allocated int64
	// sizeUnknown is why allocated is not known ("" if it is): the size
	// walk passed a bound.
	sizeUnknown string
}

// listingStands reports whether the last listing still describes a
// directory whose stamp is now st.
func (c *diskCache) listingStands(st dirStamp, ok bool) bool {
	return ok && c.trusted && c.stamp == st
}

// sameContent reports whether s holds exactly the names of the set the
// listing was classified against, and returns s's prints. The same map is
// the same content. A different map holding the very same strings (a
// host that rebuilds its set from the same informer objects) is told by
// a print of the strings' addresses, which reads no name; any other map by
// a digest of the names.
func (c *diskCache) sameContent(s NameSet) (same bool, p setPrints) {
	if !c.classified {
		return false, setPrints{}
	}
	if sameNameSet(c.set, s) {
		return true, c.prints
	}
	if !c.prints.hasAddr {
		c.prints.addr, c.prints.hasAddr = addrPrintOf(c.set), true
	}
	p.addr, p.hasAddr = addrPrintOf(s), true
	if p.addr == c.prints.addr {
		// The same strings are the same names: c's digest is s's too.
		p.digest, p.hasDigest = c.prints.digest, c.prints.hasDigest
		return true, p
	}
	if !c.prints.hasDigest {
		c.prints.digest, c.prints.hasDigest = digestOf(c.set), true
	}
	p.digest, p.hasDigest = digestOf(s), true
	return p.digest == c.prints.digest, p
}

// classifiedBy records that the classification now stands for s, whose
// prints are p. Keeping the newest of equal maps lets the next scan find
// the very same map.
func (c *diskCache) classifiedBy(s NameSet, p setPrints) {
	c.set, c.classified, c.prints = s, true, p
}

// relist replaces the listing with names and types, listed at stamp st,
// and classifies them against set. While set has the content the listing
// before was classified against, a directory at the same position under
// the same name as last time keeps its verdict without a look-up: on a
// large disk the look-ups would cost more than the listing.
//
// The names are classified in chunks by up to workers goroutines (see
// inChunks); nothing here makes a system call.
func (c *diskCache) relist(ctx context.Context, names []string, types []fs.FileMode, st dirStamp, trusted bool, set NameSet, sameSet bool, workers int) error {
	flags := resize(c.spareFlags, len(names))
	type found struct {
		static     []orphan.Skipped
		tombstones int
	}
	parts := make([]found, chunksOf(len(names)))
	err := inChunks(ctx, len(names), workers, func(chunk, lo, hi int) {
		p := &parts[chunk]
		skip := func(name, reason string) {
			p.static = append(p.static, orphan.Skipped{Name: name, Reason: reason})
		}
		for i := lo; i < hi; i++ {
			name, typ := names[i], types[i]
			flags[i] = 0
			switch {
			case sameSet && typ.IsDir() && i < len(c.names) && c.flags[i]&entryOwned != 0 && c.names[i] == name:
				flags[i] = entryValid | entryOwned
			// Tombstones and markers are hidden: most names skip both checks.
			case hidden(name) && isTombstone(name):
				skip(name, "a purge in progress (caretaker tombstone; FinishInterrupted finishes it if its marker proves it is caretaker's)")
				p.tombstones++
			case hidden(name) && isMarker(name):
				skip(name, "a caretaker purge marker")
				p.tombstones++
			case typ&fs.ModeSymlink != 0:
				skip(name, "a symbolic link: never followed")
			case !typ.IsDir():
				skip(name, "not a directory")
			case !ValidDataName(name):
				skip(name, "name does not end in -<8 letters or digits>")
			case set.Has(name):
				flags[i] = entryValid | entryOwned
			default:
				flags[i] = entryValid
			}
		}
	})
	if err != nil {
		return err
	}
	var static []orphan.Skipped
	tombstones := 0
	for _, p := range parts {
		static = append(static, p.static...)
		tombstones += p.tombstones
	}
	slices.SortFunc(static, func(a, b orphan.Skipped) int { return strings.Compare(a.Name, b.Name) })
	clear(c.names) // drop the old names for the garbage collector
	c.spareNames, c.spareFlags, c.spareTypes = c.names, c.flags, c.types
	c.names, c.flags, c.types, c.static, c.tombstones = names, flags, types, static, tombstones
	c.stamp, c.trusted = st, trusted
	return nil
}

// hidden reports whether name starts with a dot, as every tombstone and
// marker does.
func hidden(name string) bool { return len(name) > 0 && name[0] == '.' }

// classify classifies the listing's valid directories against set, in
// chunks by up to workers goroutines. Stopped by ctx, it leaves the
// listing unclassified, so the next scan classifies it again.
func (c *diskCache) classify(ctx context.Context, set NameSet, workers int) error {
	c.classified = false
	return inChunks(ctx, len(c.flags), workers, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			if c.flags[i]&entryValid == 0 {
				continue
			}
			if set.Has(c.names[i]) {
				c.flags[i] = entryValid | entryOwned
			} else {
				c.flags[i] = entryValid
			}
		}
	})
}

// derive computes what the reports take from the classification.
func (c *diskCache) derive(listOwned bool) {
	c.owned = 0
	c.candidates = c.candidates[:0]
	c.ownedNames = c.ownedNames[:0]
	for i, f := range c.flags {
		switch {
		case f&entryOwned != 0:
			c.owned++
			if listOwned {
				c.ownedNames = append(c.ownedNames, c.names[i])
			}
		case f&entryValid != 0:
			c.candidates = append(c.candidates, int32(i))
		}
	}
	slices.Sort(c.ownedNames)
	// In name order, so the orphans come out sorted.
	slices.SortFunc(c.candidates, func(a, b int32) int { return strings.Compare(c.names[a], c.names[b]) })
}

// setPrints are the prints of a set computed so far.
type setPrints struct {
	addr, digest       setDigest
	hasAddr, hasDigest bool
}

// setDigest is an order-independent digest of a set of names: the number
// of names and two sums over their keyed hashes (maphash under a seed
// drawn at random for this process), the second through a bijective
// non-linear mix, so that two different sets of the same size agree on
// both sums with a probability far below 2^-64, and nobody can aim at
// that without the seed. A miss would only make one scan's report stale:
// Judge and Delete ask the source again. Hashing is cheap; walking the
// map costs about as much again, and both together about a tenth of
// looking every name up.
//
// The address print is the same over each name's address and length
// instead of its bytes: Go strings are immutable and the set the cache
// holds keeps its strings alive, so a string of the new set at the
// address and length of one of the old set has its bytes. It reads no
// name, so it costs a walk of the map.
type setDigest struct {
	n          int
	sum1, sum2 uint64
}

var digestSeed = maphash.MakeSeed()

// digestOf returns the digest of s.
func digestOf(s NameSet) setDigest {
	d := setDigest{n: len(s)}
	for name := range s {
		h := maphash.String(digestSeed, name)
		d.sum1 += h
		d.sum2 += mix64(h)
	}
	return d
}

// addrPrintOf returns the address print of s (see setDigest).
func addrPrintOf(s NameSet) setDigest {
	d := setDigest{n: len(s)}
	for name := range s {
		h := maphash.Comparable(digestSeed, [2]uintptr{uintptr(unsafe.Pointer(unsafe.StringData(name))), uintptr(len(name))})
		d.sum1 += h
		d.sum2 += mix64(h)
	}
	return d
}

// mix64 is splitmix64's finaliser: a bijection of uint64 that mixes
// every bit into every other.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
