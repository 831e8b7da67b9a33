package block

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
)

func TestChecksumCoversKeyAndPayload(t *testing.T) {
	p := []byte("kv payload")
	base := Checksum(Key{Tenant: "a", ID: 1}, p)
	cases := []struct {
		name string
		k    Key
		p    []byte
	}{
		{"other id", Key{Tenant: "a", ID: 2}, p},
		{"other tenant", Key{Tenant: "b", ID: 1}, p},
		{"no tenant", Key{Tenant: "", ID: 1}, p},
		// The length prefix keeps ("ab", id) and ("a", id') with shifted bytes apart.
		{"tenant boundary", Key{Tenant: "a\x01", ID: 1}, p},
		{"flipped payload bit", Key{Tenant: "a", ID: 1}, []byte("kv paylobd")},
		{"truncated payload", Key{Tenant: "a", ID: 1}, p[:len(p)-1]},
	}
	for _, c := range cases {
		if Checksum(c.k, c.p) == base {
			t.Errorf("%s: checksum collides with the original", c.name)
		}
	}
	if !Verify(Key{Tenant: "a", ID: 1}, p, base) || Verify(Key{Tenant: "a", ID: 2}, p, base) {
		t.Fatal("Verify disagrees with Checksum")
	}
}

func TestChecksumLongTenantDoesNotPanic(t *testing.T) {
	k := Key{Tenant: strings.Repeat("x", 10*MaxTenantLen), ID: 7}
	if Checksum(k, nil) == Checksum(Key{Tenant: strings.Repeat("x", MaxTenantLen), ID: 7}, nil) {
		t.Fatal("long tenant truncated into the checksum")
	}
}

func TestValidate(t *testing.T) {
	for _, ok := range []string{"", "team-a", "A.b_c-9"} {
		if err := (Key{Tenant: ok}).Validate(); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"a/b", "a b", "é", strings.Repeat("x", MaxTenantLen+1), "../x"} {
		if err := (Key{Tenant: bad}).Validate(); !errors.Is(err, ErrBadTenant) {
			t.Errorf("%q: got %v, want ErrBadTenant", bad, err)
		}
	}
}

func TestString(t *testing.T) {
	if got := (Key{Tenant: "t", ID: 255}).String(); got != "t/00000000000000ff" {
		t.Fatal(got)
	}
	if got := (Key{Tenant: "", ID: 255}).String(); got != "00000000000000ff" {
		t.Fatal(got)
	}
}

func BenchmarkChecksum1MiB(b *testing.B) {
	p := make([]byte, 1<<20)
	k := Key{Tenant: "tenant", ID: 42}
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		Checksum(k, p)
	}
}

// TestChecksumMatchesPlainCRC32C pins the definition: CRC-32C of
// le32(len(tenant)) || tenant || le64(id) || payload.
func TestChecksumMatchesPlainCRC32C(t *testing.T) {
	for _, k := range []Key{{Tenant: "", ID: 0}, {Tenant: "t", ID: 1}, {Tenant: "tenant-x", ID: 0xdeadbeefcafef00d}, {Tenant: strings.Repeat("y", 200), ID: 5}} {
		payload := []byte("some kv bytes")
		var buf []byte
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(k.Tenant)))
		buf = append(buf, k.Tenant...)
		buf = binary.LittleEndian.AppendUint64(buf, k.ID)
		buf = append(buf, payload...)
		if got, want := Checksum(k, payload), crc32.Checksum(buf, crc32.MakeTable(crc32.Castagnoli)); got != want {
			t.Errorf("%v: Checksum = %08x, plain CRC-32C = %08x", k, got, want)
		}
	}
}

func TestChecksumDoesNotAllocate(t *testing.T) {
	p := make([]byte, 4096)
	k := Key{Tenant: "tenant", ID: 9}
	if n := testing.AllocsPerRun(100, func() { Checksum(k, p) }); n != 0 {
		t.Fatalf("Checksum allocates %v times per call", n)
	}
}

// TestNamedChecksum pins the named form: CRC-32C of le32(len(tenant)) ||
// tenant || 0xff || le32(len(name)) || name || payload, independent of the
// id, and apart from every other name, tenant and chain key.
func TestNamedChecksum(t *testing.T) {
	payload := []byte("lmcache chunk")
	for _, k := range []Key{Named("", "a"), Named("t", "meta-llama/Llama-3.1-8B@1@0@5f3a@bfloat16kv_bytes"), Named("t", strings.Repeat("\x00", MaxNameLen))} {
		var buf []byte
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(k.Tenant)))
		buf = append(buf, k.Tenant...)
		buf = append(buf, 0xff)
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(k.Name)))
		buf = append(buf, k.Name...)
		buf = append(buf, payload...)
		if got, want := Checksum(k, payload), crc32.Checksum(buf, crc32.MakeTable(crc32.Castagnoli)); got != want {
			t.Errorf("%v: Checksum = %08x, plain CRC-32C = %08x", k, got, want)
		}
		other := k
		other.ID++ // a colliding or injected id does not change the sum
		if Checksum(other, payload) != Checksum(k, payload) {
			t.Errorf("%v: the id changed a named key's checksum", k)
		}
	}
	base := Named("t", "ab")
	sum := Checksum(base, payload)
	for _, k := range []Key{Named("t", "ab\x00"), Named("t", "a"), Named("u", "ab"), Named("", "ab"), {Tenant: "t", ID: base.ID}} {
		if Checksum(k, payload) == sum {
			t.Errorf("%v: checksum collides with %v", k, base)
		}
	}
}

func TestChecksumSegments(t *testing.T) {
	p := []byte("0123456789abcdef")
	for _, k := range []Key{{Tenant: "t", ID: 3}, Named("t", "x")} {
		want := Checksum(k, p)
		for _, segs := range [][][]byte{{p}, {p[:1], p[1:]}, {nil, p[:7], nil, p[7:12], p[12:]}} {
			if got := ChecksumSegments(k, segs); got != want {
				t.Errorf("%v: ChecksumSegments(%d pieces) = %08x, Checksum = %08x", k, len(segs), got, want)
			}
		}
	}
}

func TestNamedKey(t *testing.T) {
	k := Named("t", "x")
	if !k.IsNamed() || k.ID != NameID("x") || (Key{Tenant: "t", ID: 1}).IsNamed() {
		t.Fatalf("Named = %+v", k)
	}
	if err := Named("t", strings.Repeat("n", MaxNameLen)).Validate(); err != nil {
		t.Errorf("a %d-byte name: %v", MaxNameLen, err)
	}
	err := Named("t", strings.Repeat("n", MaxNameLen+1)).Validate()
	if !errors.Is(err, ErrBadName) || !strings.Contains(err.Error(), "1025 bytes, limit 1024") {
		t.Errorf("a %d-byte name: %v, want ErrBadName naming both sizes", MaxNameLen+1, err)
	}
	if got := Named("t", "a\nb").String(); got != `t/"a\nb"` {
		t.Errorf("String = %s", got)
	}
	if got := Named("", strings.Repeat("z", 100)).String(); !strings.HasSuffix(got, "…(100 bytes)") || strings.Count(got, "z") != 64 {
		t.Errorf("String of a long name = %s", got)
	}
}

func TestNamedChecksumDoesNotAllocate(t *testing.T) {
	p := make([]byte, 4096)
	k := Named("tenant", "some/long/name@1@0@abcdef@bfloat16kv_bytes")
	if n := testing.AllocsPerRun(100, func() { Checksum(k, p) }); n != 0 {
		t.Fatalf("Checksum allocates %v times per call", n)
	}
}
