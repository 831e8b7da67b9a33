// Package payload generates the deterministic block payloads of live runs:
// the bytes of block (tenant, id) are a pure function of the pair, so a
// reader can regenerate any block it receives and compare it byte for
// byte, and a writer never has to keep what it stored.
//
// The generator is SplitMix64 (Steele, Lea, Flood 2014) seeded with an
// FNV-1a hash of the tenant mixed with the block ID; it fills 8 bytes per
// step, fast enough (several GB/s) not to matter next to the paced paths.
package payload

import (
	"encoding/binary"
	"fmt"

	"github.com/kvpool/kvpool/block"
)

// seed derives the generator's state from (tenant, id).
func seed(tenant string, id uint64) uint64 {
	h := block.FNV1a(tenant)
	h ^= uint64(len(tenant)) // "" and "\x00…" differ
	h *= block.FNVPrime64
	return block.Mix64(h ^ block.Mix64(id+block.Golden64))
}

// Fill writes block (tenant, id)'s payload into dst: len(dst) bytes, the
// same for the same tenant, id and length, and the first k bytes of a
// longer fill equal a fill of length k.
func Fill(dst []byte, tenant string, id uint64) {
	s := seed(tenant, id)
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		s += block.Golden64
		binary.LittleEndian.PutUint64(dst[i:], block.Mix64(s))
	}
	if i < len(dst) {
		s += block.Golden64
		var tail [8]byte
		binary.LittleEndian.PutUint64(tail[:], block.Mix64(s))
		copy(dst[i:], tail[:])
	}
}

// New returns a fresh n-byte payload of block (tenant, id).
func New(n int, tenant string, id uint64) []byte {
	b := make([]byte, n)
	Fill(b, tenant, id)
	return b
}

// Check compares got with the size-byte payload of block (tenant, id),
// byte for byte, without allocating. It
// returns nil when they are equal, else an error naming the block and the
// first differing offset.
func Check(got []byte, size int, tenant string, id uint64) error {
	if len(got) != size {
		return fmt.Errorf("payload: block %016x of tenant %q: got %d bytes, want %d", id, tenant, len(got), size)
	}
	s := seed(tenant, id)
	var w [8]byte
	for i := 0; i < size; i += 8 {
		s += block.Golden64
		binary.LittleEndian.PutUint64(w[:], block.Mix64(s))
		n := min(8, size-i)
		for k := range n {
			if got[i+k] != w[k] {
				return fmt.Errorf("payload: block %016x of tenant %q differs from its generated payload at byte %d", id, tenant, i+k)
			}
		}
	}
	return nil
}
