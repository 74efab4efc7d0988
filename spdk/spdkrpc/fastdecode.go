package spdkrpc

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// decodeFast decodes result, a JSON value the framer validated, into out
// without reflection when out is a nil list of a wire type (what the
// typed calls pass) or a *bool, and the value is in the plain form SPDK
// writes: exact member names, each at most once, strings without escapes
// and valid UTF-8, unsigned integers in range, no nulls. It reports
// whether it did; anything else (and out is then as it was) is left to
// json.Unmarshal, whose result and errors it would have matched.
// FuzzDecodeFast holds it to json.Unmarshal.
func decodeFast(result []byte, out any) bool {
	switch out := out.(type) {
	case *bool:
		switch string(result) {
		case "true":
			*out = true
		case "false":
			*out = false
		default:
			return false
		}
		return true
	case *[]Lvstore:
		return decodeList(result, out, lvstoreFields)
	case *[]Lvol:
		return decodeList(result, out, lvolFields)
	case *[]RaidBdev:
		return decodeList(result, out, raidBdevFields)
	case *[]Bdev:
		return decodeList(result, out, bdevFields)
	}
	return false
}

// field decodes one member of a T.
type field[T any] struct {
	name string
	dec  func(d *fastDecoder, v *T) bool
}

// fastDecoder reads a valid JSON value; every method returns false to
// give up, leaving d somewhere inside it.
type fastDecoder struct {
	b []byte
	i int
}

func decodeList[T any](b []byte, out *[]T, fields []field[T]) bool {
	if *out != nil {
		return false // json.Unmarshal reuses what out holds
	}
	// The field decoders are called through func values, so d escapes:
	// a recycled one saves an allocation per call.
	d := fastDecoders.Get().(*fastDecoder)
	d.b, d.i = b, 0
	ok := decodeArray(d, out, fields)
	d.b = nil
	fastDecoders.Put(d)
	if !ok {
		*out = nil
	}
	return ok
}

var fastDecoders = sync.Pool{New: func() any { return new(fastDecoder) }}

func (d *fastDecoder) space() {
	for d.i < len(d.b) && isSpace(d.b[d.i]) {
		d.i++
	}
}

// next skips whitespace and returns the next byte (0 at the end).
func (d *fastDecoder) next() byte {
	d.space()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// str reads a string without escapes and of valid UTF-8, whose bytes
// json.Unmarshal would take as they are.
func (d *fastDecoder) str() ([]byte, bool) {
	if d.next() != '"' {
		return nil, false
	}
	start := d.i + 1
	ascii := true
	for d.i = start; d.i < len(d.b) && d.b[d.i] != '"'; d.i++ {
		switch c := d.b[d.i]; {
		case c == '\\':
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	s := d.b[start:d.i]
	d.i++
	if !ascii && !utf8.Valid(s) {
		return nil, false // json.Unmarshal would replace the invalid bytes
	}
	return s, true
}

// uint reads an unsigned integer of at most bits bits.
func (d *fastDecoder) uint(bits int) (uint64, bool) {
	d.space()
	start := d.i
	limit := uint64(1)<<bits - 1 // all ones for 64 bits too
	var n uint64
	for ; d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9'; d.i++ {
		c := uint64(d.b[d.i] - '0')
		if n > (limit-c)/10 {
			return 0, false
		}
		n = n*10 + c
	}
	if d.i == start || d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		return 0, false
	}
	return n, true
}

func (d *fastDecoder) boolean() (bool, bool) {
	d.space()
	// The value is valid JSON: a 't' starts true, an 'f' false.
	switch d.next() {
	case 't':
		d.i += len("true")
		return true, true
	case 'f':
		d.i += len("false")
		return false, true
	}
	return false, false
}

// skip passes over one valid value.
func (d *fastDecoder) skip() {
	d.space()
	d.i = skipValue(d.b, d.i)
}

// decodeArray reads an array of objects into *out, which is nil.
func decodeArray[T any](d *fastDecoder, out *[]T, fields []field[T]) bool {
	if d.next() != '[' {
		return false
	}
	d.i++
	if d.next() == ']' {
		d.i++
		*out = []T{} // an empty list, not a nil one
		return true
	}
	var list []T
	for {
		var zero T
		list = append(list, zero)
		if !decodeObject(d, &list[len(list)-1], fields) {
			return false
		}
		switch d.next() {
		case ',':
			d.i++
		case ']':
			d.i++
			*out = list
			return true
		default:
			return false
		}
	}
}

// decodeObject reads an object into v, member by member. A member whose
// name json.Unmarshal could match to a field by case folding, or a field
// given twice, gives up.
func decodeObject[T any](d *fastDecoder, v *T, fields []field[T]) bool {
	if d.next() != '{' {
		return false
	}
	d.i++
	if d.next() == '}' {
		d.i++
		return true
	}
	var seen uint64
	for {
		key, ok := d.str()
		if !ok || d.next() != ':' {
			return false
		}
		d.i++
		f := -1
		for j := range fields {
			if string(key) == fields[j].name {
				f = j
				break
			}
		}
		if f < 0 {
			for j := range fields {
				if strings.EqualFold(string(key), fields[j].name) || !isASCII(key) {
					return false
				}
			}
			d.skip()
		} else {
			if seen&(1<<f) != 0 {
				return false
			}
			seen |= 1 << f
			if !fields[f].dec(d, v) {
				return false
			}
		}
		switch d.next() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func strField[T any](name string, get func(*T) *string) field[T] {
	return field[T]{name, func(d *fastDecoder, v *T) bool {
		s, ok := d.str()
		if ok {
			*get(v) = string(s)
		}
		return ok
	}}
}

func uint64Field[T any](name string, get func(*T) *uint64) field[T] {
	return field[T]{name, func(d *fastDecoder, v *T) bool {
		n, ok := d.uint(64)
		*get(v) = n
		return ok
	}}
}

// optUint64Field is a member whose absence differs from zero: it is set
// only when the member is there.
func optUint64Field[T any](name string, get func(*T) **uint64) field[T] {
	return field[T]{name, func(d *fastDecoder, v *T) bool {
		n, ok := d.uint(64)
		if ok {
			*get(v) = &n
		}
		return ok
	}}
}

func uint32Field[T any](name string, get func(*T) *uint32) field[T] {
	return field[T]{name, func(d *fastDecoder, v *T) bool {
		n, ok := d.uint(32)
		*get(v) = uint32(n)
		return ok
	}}
}

func boolField[T any](name string, get func(*T) *bool) field[T] {
	return field[T]{name, func(d *fastDecoder, v *T) bool {
		b, ok := d.boolean()
		*get(v) = b
		return ok
	}}
}

func stringsField[T any](name string, get func(*T) *[]string) field[T] {
	return field[T]{name, func(d *fastDecoder, v *T) bool {
		if d.next() != '[' {
			return false
		}
		d.i++
		list := []string{}
		if d.next() == ']' {
			d.i++
			*get(v) = list
			return true
		}
		for {
			s, ok := d.str()
			if !ok {
				return false
			}
			list = append(list, string(s))
			switch d.next() {
			case ',':
				d.i++
			case ']':
				d.i++
				*get(v) = list
				return true
			default:
				return false
			}
		}
	}}
}

func objectField[T, U any](name string, get func(*T) *U, fields func() []field[U]) field[T] {
	return field[T]{name, func(d *fastDecoder, v *T) bool {
		return decodeObject(d, get(v), fields())
	}}
}

func pointerField[T, U any](name string, get func(*T) **U, fields func() []field[U]) field[T] {
	return field[T]{name, func(d *fastDecoder, v *T) bool {
		u := new(U)
		*get(v) = u
		return decodeObject(d, u, fields())
	}}
}

func listField[T, U any](name string, get func(*T) *[]U, fields func() []field[U]) field[T] {
	return field[T]{name, func(d *fastDecoder, v *T) bool {
		return decodeArray(d, get(v), fields())
	}}
}

// The field tables spell each member as the struct tags in wire.go do;
// TestFastFieldsMatchTags checks them against the tags.
var (
	lvstoreFields = []field[Lvstore]{
		strField("uuid", func(v *Lvstore) *string { return &v.UUID }),
		strField("name", func(v *Lvstore) *string { return &v.Name }),
		strField("base_bdev", func(v *Lvstore) *string { return &v.BaseBdev }),
		uint64Field("total_data_clusters", func(v *Lvstore) *uint64 { return &v.TotalDataClusters }),
		uint64Field("free_clusters", func(v *Lvstore) *uint64 { return &v.FreeClusters }),
		uint64Field("block_size", func(v *Lvstore) *uint64 { return &v.BlockSize }),
		uint64Field("cluster_size", func(v *Lvstore) *uint64 { return &v.ClusterSize }),
	}
	lvolFields = []field[Lvol]{
		strField("alias", func(v *Lvol) *string { return &v.Alias }),
		strField("uuid", func(v *Lvol) *string { return &v.UUID }),
		strField("name", func(v *Lvol) *string { return &v.Name }),
		boolField("is_thin_provisioned", func(v *Lvol) *bool { return &v.IsThinProvisioned }),
		boolField("is_snapshot", func(v *Lvol) *bool { return &v.IsSnapshot }),
		boolField("is_clone", func(v *Lvol) *bool { return &v.IsClone }),
		boolField("is_esnap_clone", func(v *Lvol) *bool { return &v.IsEsnapClone }),
		boolField("is_degraded", func(v *Lvol) *bool { return &v.IsDegraded }),
		optUint64Field("num_allocated_clusters", func(v *Lvol) **uint64 { return &v.NumAllocatedClusters }),
		objectField("lvs", func(v *Lvol) *LvolStoreRef { return &v.Lvs }, func() []field[LvolStoreRef] { return lvolStoreRefFields }),
	}
	lvolStoreRefFields = []field[LvolStoreRef]{
		strField("name", func(v *LvolStoreRef) *string { return &v.Name }),
		strField("uuid", func(v *LvolStoreRef) *string { return &v.UUID }),
	}
	raidBdevFields = append([]field[RaidBdev]{
		strField("name", func(v *RaidBdev) *string { return &v.Name }),
	}, embed(raidInfoFields, func(v *RaidBdev) *BdevRaidInfo { return &v.BdevRaidInfo })...)
	raidInfoFields = []field[BdevRaidInfo]{
		strField("uuid", func(v *BdevRaidInfo) *string { return &v.UUID }),
		uint32Field("strip_size_kb", func(v *BdevRaidInfo) *uint32 { return &v.StripSizeKB }),
		strField("state", func(v *BdevRaidInfo) *string { return &v.State }),
		strField("raid_level", func(v *BdevRaidInfo) *string { return &v.RaidLevel }),
		boolField("superblock", func(v *BdevRaidInfo) *bool { return &v.Superblock }),
		uint32Field("num_base_bdevs", func(v *BdevRaidInfo) *uint32 { return &v.NumBaseBdevs }),
		uint32Field("num_base_bdevs_discovered", func(v *BdevRaidInfo) *uint32 { return &v.NumBaseBdevsDiscovered }),
		uint32Field("num_base_bdevs_operational", func(v *BdevRaidInfo) *uint32 { return &v.NumBaseBdevsOperational }),
		listField("base_bdevs_list", func(v *BdevRaidInfo) *[]RaidBaseBdev { return &v.BaseBdevsList }, func() []field[RaidBaseBdev] { return raidBaseFields }),
	}
	raidBaseFields = []field[RaidBaseBdev]{
		strField("name", func(v *RaidBaseBdev) *string { return &v.Name }),
		strField("uuid", func(v *RaidBaseBdev) *string { return &v.UUID }),
		boolField("is_configured", func(v *RaidBaseBdev) *bool { return &v.IsConfigured }),
		uint64Field("data_offset", func(v *RaidBaseBdev) *uint64 { return &v.DataOffset }),
		uint64Field("data_size", func(v *RaidBaseBdev) *uint64 { return &v.DataSize }),
	}
	bdevFields = []field[Bdev]{
		strField("name", func(v *Bdev) *string { return &v.Name }),
		stringsField("aliases", func(v *Bdev) *[]string { return &v.Aliases }),
		strField("product_name", func(v *Bdev) *string { return &v.ProductName }),
		uint32Field("block_size", func(v *Bdev) *uint32 { return &v.BlockSize }),
		uint64Field("num_blocks", func(v *Bdev) *uint64 { return &v.NumBlocks }),
		strField("uuid", func(v *Bdev) *string { return &v.UUID }),
		boolField("claimed", func(v *Bdev) *bool { return &v.Claimed }),
		objectField("driver_specific", func(v *Bdev) *BdevDriverSpecific { return &v.DriverSpecific }, func() []field[BdevDriverSpecific] { return driverSpecificFields }),
	}
	driverSpecificFields = []field[BdevDriverSpecific]{
		pointerField("lvol", func(v *BdevDriverSpecific) **BdevLvolInfo { return &v.Lvol }, func() []field[BdevLvolInfo] { return lvolInfoFields }),
		pointerField("raid", func(v *BdevDriverSpecific) **BdevRaidInfo { return &v.Raid }, func() []field[BdevRaidInfo] { return raidInfoFields }),
	}
	lvolInfoFields = []field[BdevLvolInfo]{
		strField("lvol_store_uuid", func(v *BdevLvolInfo) *string { return &v.LvolStoreUUID }),
		strField("base_bdev", func(v *BdevLvolInfo) *string { return &v.BaseBdev }),
		boolField("thin_provision", func(v *BdevLvolInfo) *bool { return &v.ThinProvision }),
		optUint64Field("num_allocated_clusters", func(v *BdevLvolInfo) **uint64 { return &v.NumAllocatedClusters }),
		boolField("snapshot", func(v *BdevLvolInfo) *bool { return &v.Snapshot }),
		boolField("clone", func(v *BdevLvolInfo) *bool { return &v.Clone }),
		strField("base_snapshot", func(v *BdevLvolInfo) *string { return &v.BaseSnapshot }),
		stringsField("clones", func(v *BdevLvolInfo) *[]string { return &v.Clones }),
		boolField("esnap_clone", func(v *BdevLvolInfo) *bool { return &v.EsnapClone }),
	}
)

// embed lifts the fields of an embedded struct into its container's table.
func embed[T, U any](fields []field[U], get func(*T) *U) []field[T] {
	out := make([]field[T], len(fields))
	for i, f := range fields {
		out[i] = field[T]{f.name, func(d *fastDecoder, v *T) bool { return f.dec(d, get(v)) }}
	}
	return out
}
