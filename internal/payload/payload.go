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
)

// FNV-1a 64-bit parameters (the published offset basis and prime).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// golden is SplitMix64's increment, 2^64 divided by the golden ratio.
const golden = 0x9e3779b97f4a7c15

// seed derives the generator's state from (tenant, id).
func seed(tenant string, id uint64) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(tenant); i++ {
		h ^= uint64(tenant[i])
		h *= fnvPrime
	}
	h ^= uint64(len(tenant)) // "" and "\x00…" differ
	h *= fnvPrime
	return mix(h ^ mix(id+golden))
}

// mix is SplitMix64's output function.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Fill writes block (tenant, id)'s payload into dst: len(dst) bytes, the
// same for the same tenant, id and length, and the first k bytes of a
// longer fill equal a fill of length k.
func Fill(dst []byte, tenant string, id uint64) {
	s := seed(tenant, id)
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		s += golden
		binary.LittleEndian.PutUint64(dst[i:], mix(s))
	}
	if i < len(dst) {
		s += golden
		var tail [8]byte
		binary.LittleEndian.PutUint64(tail[:], mix(s))
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
		s += golden
		binary.LittleEndian.PutUint64(w[:], mix(s))
		n := min(8, size-i)
		for k := range n {
			if got[i+k] != w[k] {
				return fmt.Errorf("payload: block %016x of tenant %q differs from its generated payload at byte %d", id, tenant, i+k)
			}
		}
	}
	return nil
}
