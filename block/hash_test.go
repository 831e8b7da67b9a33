package block

import "testing"

func TestFNV1a(t *testing.T) {
	// Reference values of 64-bit FNV-1a (the FNV test suite of
	// draft-eastlake-fnv).
	for s, want := range map[string]uint64{
		"":       0xcbf29ce484222325,
		"a":      0xaf63dc4c8601ec8c,
		"foobar": 0x85944171f73967e8,
	} {
		if got := FNV1a(s); got != want {
			t.Errorf("FNV1a(%q) = %#x, want %#x", s, got, want)
		}
	}
}

func TestMix64(t *testing.T) {
	// The first outputs of SplitMix64 seeded with 0 (state += Golden64,
	// output Mix64(state)), as the reference implementation prints them.
	var s uint64
	for i, want := range []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f} {
		s += Golden64
		if got := Mix64(s); got != want {
			t.Errorf("output %d = %#x, want %#x", i, got, want)
		}
	}
	if Mix64(0) != 0 {
		t.Errorf("Mix64(0) = %#x, want 0", Mix64(0))
	}
}

func TestKeyHash(t *testing.T) {
	k := Key{Tenant: "acme", ID: 42}
	if got, want := k.Hash(), Mix64(42^FNV1a("acme")); got != want {
		t.Errorf("Hash = %#x, want %#x", got, want)
	}
	if (Key{Tenant: "a", ID: 1}).Hash() == (Key{Tenant: "b", ID: 1}).Hash() {
		t.Error("the same ID in two tenants hashes alike")
	}
	seen := map[uint64]bool{}
	for id := uint64(0); id < 1000; id++ {
		h := Key{Tenant: "t", ID: id}.Hash()
		if seen[h] {
			t.Fatalf("IDs of one tenant collide at %d", id)
		}
		seen[h] = true
	}
}
