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
	base := Checksum(Key{"a", 1}, p)
	cases := []struct {
		name string
		k    Key
		p    []byte
	}{
		{"other id", Key{"a", 2}, p},
		{"other tenant", Key{"b", 1}, p},
		{"no tenant", Key{"", 1}, p},
		// The length prefix keeps ("ab", id) and ("a", id') with shifted bytes apart.
		{"tenant boundary", Key{"a\x01", 1}, p},
		{"flipped payload bit", Key{"a", 1}, []byte("kv paylobd")},
		{"truncated payload", Key{"a", 1}, p[:len(p)-1]},
	}
	for _, c := range cases {
		if Checksum(c.k, c.p) == base {
			t.Errorf("%s: checksum collides with the original", c.name)
		}
	}
	if !Verify(Key{"a", 1}, p, base) || Verify(Key{"a", 2}, p, base) {
		t.Fatal("Verify disagrees with Checksum")
	}
}

func TestChecksumLongTenantDoesNotPanic(t *testing.T) {
	k := Key{strings.Repeat("x", 10*MaxTenantLen), 7}
	if Checksum(k, nil) == Checksum(Key{strings.Repeat("x", MaxTenantLen), 7}, nil) {
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
	if got := (Key{"t", 255}).String(); got != "t/00000000000000ff" {
		t.Fatal(got)
	}
	if got := (Key{"", 255}).String(); got != "00000000000000ff" {
		t.Fatal(got)
	}
}

func BenchmarkChecksum1MiB(b *testing.B) {
	p := make([]byte, 1<<20)
	k := Key{"tenant", 42}
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		Checksum(k, p)
	}
}

// TestChecksumMatchesPlainCRC32C pins the definition: CRC-32C of
// le32(len(tenant)) || tenant || le64(id) || payload.
func TestChecksumMatchesPlainCRC32C(t *testing.T) {
	for _, k := range []Key{{"", 0}, {"t", 1}, {"tenant-x", 0xdeadbeefcafef00d}, {strings.Repeat("y", 200), 5}} {
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
	k := Key{"tenant", 9}
	if n := testing.AllocsPerRun(100, func() { Checksum(k, p) }); n != 0 {
		t.Fatalf("Checksum allocates %v times per call", n)
	}
}
