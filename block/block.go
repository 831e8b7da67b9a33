// Package block defines what the store holds: a block key (a tenant
// namespace plus the block's prefix-chain hash) and the checksum that
// travels with every copy of a block.
//
// The checksum covers the key as well as the payload, so a copy handed out
// under the wrong key (a misdirected read, a reused slot, a mixed-up
// response) fails verification exactly like a flipped bit does: a client
// that verifies what it receives against the key it asked for can never
// accept another block's bytes.
package block

import (
	"errors"
	"fmt"
	"hash/crc32"
)

// MaxTenantLen is the longest tenant name accepted (bytes). Slot headers and
// wire frames reserve room for it.
const MaxTenantLen = 64

// Key identifies a block: its tenant namespace and its prefix-chain hash
// (a trace hash_id, or the hash of the block's tokens and all before them).
type Key struct {
	Tenant string
	ID     uint64
}

// String formats the key as tenant/0123456789abcdef (tenant omitted when empty).
func (k Key) String() string {
	if k.Tenant == "" {
		return fmt.Sprintf("%016x", k.ID)
	}
	return fmt.Sprintf("%s/%016x", k.Tenant, k.ID)
}

// ErrBadTenant is returned by Key.Validate for a tenant name that is too
// long or contains bytes other than [A-Za-z0-9._-].
var ErrBadTenant = errors.New("bad tenant name")

// Validate checks the tenant name.
func (k Key) Validate() error {
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

// Checksum returns the CRC-32C of the key (tenant length as a little-endian
// uint32, tenant bytes, id) followed by the payload. It is defined for any
// tenant, valid or not, so a caller never has to validate before hashing.
func Checksum(k Key, payload []byte) uint32 {
	// The key part is folded in with a byte-wise table update: handing a
	// stack buffer to crc32.Update would move it to the heap, one
	// allocation per block on the hottest path.
	n := uint32(len(k.Tenant))
	crc := ^uint32(0)
	for i := 0; i < 4; i++ {
		crc = castagnoli[byte(crc)^byte(n>>(8*i))] ^ crc>>8
	}
	for i := 0; i < len(k.Tenant); i++ {
		crc = castagnoli[byte(crc)^k.Tenant[i]] ^ crc>>8
	}
	for i := 0; i < 8; i++ {
		crc = castagnoli[byte(crc)^byte(k.ID>>(8*i))] ^ crc>>8
	}
	return crc32.Update(^crc, castagnoli, payload)
}

// Verify reports whether payload is the block k with checksum sum.
func Verify(k Key, payload []byte, sum uint32) bool {
	return Checksum(k, payload) == sum
}
