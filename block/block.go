// Package block defines what the store holds: a key (a tenant namespace
// plus either the block's prefix-chain hash or a name of the caller's own)
// and the checksum that travels with every copy of an object.
//
// Two kinds of key share one type. A chain key (Name empty) is what the
// lab and the prefix lookups use: ID is the block's prefix-chain hash. A
// named key (Name set) is an object stored under a byte string of 1 to
// MaxNameLen bytes, as a Redis client or LMCache names its chunks; its ID
// is NameID(Name), the internal 64-bit id the tiers and the master index
// by. Two names may share an ID: every tier stores the full name with the
// object and compares it on every read, so a read never returns an object
// stored under another name.
//
// The checksum covers the key as well as the payload, so a copy handed out
// under the wrong key (a misdirected read, a reused chunk or page, a
// mixed-up response) fails verification exactly like a flipped bit does: a client
// that verifies what it receives against the key it asked for can never
// accept another block's bytes.
package block

import (
	"errors"
	"fmt"
	"hash/crc32"
	"unsafe"
)

// MaxTenantLen is the longest tenant name accepted (bytes). The SSD tier's
// records and the wire frames reserve room for it.
const MaxTenantLen = 64

// MaxNameLen is the longest object name accepted (bytes).
const MaxNameLen = 1 << 10

// Key identifies an object: its tenant namespace and either its
// prefix-chain hash (a trace hash_id, or the hash of the block's tokens and
// all before them) or its name.
type Key struct {
	Tenant string
	// ID is the chain hash of a chain key, or the internal id of a named
	// key (NameID(Name), unless a test injects another).
	ID uint64
	// Name is the object's name (any bytes, 1 to MaxNameLen); empty for a
	// chain key.
	Name string
}

// Named returns the key of the object called name in tenant.
func Named(tenant, name string) Key {
	return Key{Tenant: tenant, ID: NameID(name), Name: name}
}

// NameID returns the internal id of a name: Mix64 of its FNV-1a hash.
// It is not keyed: two names may share an id, which every tier tolerates
// by comparing full names.
func NameID(name string) uint64 { return Mix64(FNV1a(name)) }

// IsNamed reports whether k is a named key.
func (k Key) IsNamed() bool { return k.Name != "" }

// maxShownName is how many bytes of a name String shows.
const maxShownName = 64

// String formats the key as tenant/0123456789abcdef for a chain key and
// tenant/"name" for a named key (tenant omitted when empty; a name over 64
// bytes is cut, its length given).
func (k Key) String() string {
	var s string
	switch {
	case k.Name == "":
		s = fmt.Sprintf("%016x", k.ID)
	case len(k.Name) > maxShownName:
		s = fmt.Sprintf("%q…(%d bytes)", k.Name[:maxShownName], len(k.Name))
	default:
		s = fmt.Sprintf("%q", k.Name)
	}
	if k.Tenant == "" {
		return s
	}
	return k.Tenant + "/" + s
}

// ErrBadTenant is returned by Key.Validate for a tenant name that is too
// long or contains bytes other than [A-Za-z0-9._-].
var ErrBadTenant = errors.New("bad tenant name")

// ErrBadName is returned by Key.Validate for a name over MaxNameLen bytes.
var ErrBadName = errors.New("bad object name")

// Validate checks the tenant name and the object name's length.
func (k Key) Validate() error {
	if len(k.Name) > MaxNameLen {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrBadName, len(k.Name), MaxNameLen)
	}
	if len(k.Tenant) > MaxTenantLen {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrBadTenant, len(k.Tenant), MaxTenantLen)
	}
	for i := 0; i < len(k.Tenant); i++ {
		c := k.Tenant[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: byte %q at %d (allowed: letters, digits, . _ -)", ErrBadTenant, c, i)
		}
	}
	return nil
}

// castagnoli is the CRC-32C table; crc32 uses SSE4.2/ARMv8 CRC instructions
// for it, which is why CRC-32C was chosen (see BENCHMARKS.md).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of the key followed by the payload. The key
// part of a chain key is its tenant length as a little-endian uint32, the
// tenant bytes and the id; of a named key, the tenant length and bytes,
// the marker 0xff, the name length as a little-endian uint32 and the name
// bytes (not the id: the name is the identity). It is defined for any key,
// valid or not, so a caller never has to validate before hashing.
func Checksum(k Key, payload []byte) uint32 {
	return crc32.Update(KeySum(k), castagnoli, payload)
}

// ChecksumSegments is Checksum of the concatenation of segs.
func ChecksumSegments(k Key, segs [][]byte) uint32 {
	crc := KeySum(k)
	for _, s := range segs {
		crc = crc32.Update(crc, castagnoli, s)
	}
	return crc
}

// UpdateChecksum returns the checksum state crc (KeySum, or an earlier
// UpdateChecksum) after the bytes p: Checksum(k, a+b) is
// UpdateChecksum(UpdateChecksum(KeySum(k), a), b), for a caller that
// checksums a payload piece by piece as it arrives.
func UpdateChecksum(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

// KeySum returns the checksum state after the key part: Checksum(k, p) is
// crc32.Update(KeySum(k), crc32.MakeTable(crc32.Castagnoli), p), for a
// caller that checksums a payload arriving in pieces.
func KeySum(k Key) uint32 {
	// The key part is folded in with a byte-wise table update: handing a
	// stack buffer to crc32.Update would move it to the heap, one
	// allocation per block on the hottest path.
	crc := ^uint32(0)
	crc = updateU32(crc, uint32(len(k.Tenant)))
	for i := 0; i < len(k.Tenant); i++ {
		crc = castagnoli[byte(crc)^k.Tenant[i]] ^ crc>>8
	}
	if k.Name == "" {
		for i := 0; i < 8; i++ {
			crc = castagnoli[byte(crc)^byte(k.ID>>(8*i))] ^ crc>>8
		}
		return ^crc
	}
	crc = castagnoli[byte(crc)^0xff] ^ crc>>8
	crc = updateU32(crc, uint32(len(k.Name)))
	return crc32.Update(^crc, castagnoli, unsafeBytes(k.Name))
}

// updateU32 folds v, little endian, into a running (uncomplemented) CRC.
func updateU32(crc, v uint32) uint32 {
	for i := 0; i < 4; i++ {
		crc = castagnoli[byte(crc)^byte(v>>(8*i))] ^ crc>>8
	}
	return crc
}

// Verify reports whether payload is the block k with checksum sum.
func Verify(k Key, payload []byte, sum uint32) bool {
	return Checksum(k, payload) == sum
}

// unsafeBytes views s's bytes without copying; crc32.Update only reads
// them.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
