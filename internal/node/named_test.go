package node

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
)

// TestNodeNamedObjects stores named objects of 1 B, 28 B, 32 KiB, 4 MiB
// and the node's max object size through a whole node (real TCP, the
// node server, the tiered store with SSD), with more bytes than RAM
// holds so that some are read back from SSD, and reads them back
// byte-identical; then the limits, end to end.
func TestNodeNamedObjects(t *testing.T) {
	for _, cross := range []bool{false, true} {
		t.Run(map[bool]string{false: "ram", true: "ram_and_ssd"}[cross], func(t *testing.T) {
			testNodeNamedObjects(t, cross)
		})
	}
}

func testNodeNamedObjects(t *testing.T, cross bool) {
	const max = 8 << 20
	cfg := testConfig(filepath.Join(t.TempDir(), "ssd"))
	cfg.MaxObjectBytes = max
	cfg.RAM.Bytes = 8 * max // everything fits
	if cross {
		cfg.RAM.Bytes = 3 * max // some objects are demoted to SSD
	}
	cfg.SSD.Bytes = 128 << 20
	r := start(t, cfg, Options{})
	p := pool(t, r.n.Addr())
	sizes := []int{1, 28, 32 << 10, 4 << 20, max, max, max}
	names := make([]string, len(sizes))
	for i, size := range sizes {
		names[i] = fmt.Sprintf("model@%d@chunk\x00%d", i, size)
		if err := p.PutNamed(ctx, names[i], payload(uint64(i), size)); err != nil {
			t.Fatalf("PutNamed %d bytes: %v", size, err)
		}
	}
	for i, size := range sizes {
		got, sum, err := p.GetNamed(ctx, names[i], nil)
		if err != nil || !bytes.Equal(got, payload(uint64(i), size)) {
			t.Fatalf("GetNamed %d bytes: %d bytes, %v", size, len(got), err)
		}
		if sum != block.Checksum(block.Named("t", names[i]), got) {
			t.Fatalf("GetNamed %d bytes: checksum %08x", size, sum)
		}
	}
	res, err := p.MGetNamed(ctx, names[:4], nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range res {
		if res[i].Err != nil || !bytes.Equal(res[i].Payload, payload(uint64(i), sizes[i])) {
			t.Fatalf("MGetNamed %d: %v", i, res[i].Err)
		}
	}
	tiers, err := p.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ssdHits uint64
	for _, ts := range tiers {
		if ts.Name == "ssd" {
			ssdHits = ts.Stats.Hits
		}
	}
	if cross && ssdHits == 0 {
		t.Errorf("no read was served by SSD (stats %+v); the test meant to cross tiers", tiers)
	}
	ex, err := p.ExistsNamed(ctx, []string{names[0], "absent"})
	if err != nil || !ex[0] || ex[1] {
		t.Fatalf("ExistsNamed = %v, %v", ex, err)
	}
	if err := p.DeleteNamed(ctx, names[0]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.GetNamed(ctx, names[0], nil); !errors.Is(err, kvpool.ErrNotFound) {
		t.Fatalf("GetNamed after DeleteNamed: %v", err)
	}

	// Too large and too long, as the user sees them.
	err = p.PutNamed(ctx, "big", make([]byte, max+1))
	if !errors.Is(err, kvpool.ErrTooLarge) {
		t.Fatalf("PutNamed of max+1 bytes: %v", err)
	}
	for _, want := range []string{fmt.Sprint(max+1, " bytes"), fmt.Sprint("max object size of ", max, " bytes"), "--max-object-bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	err = p.PutNamed(ctx, strings.Repeat("n", 2000), []byte("x"))
	if !errors.Is(err, block.ErrBadName) || !strings.Contains(err.Error(), "2000 bytes") || !strings.Contains(err.Error(), "1024-byte limit") {
		t.Fatalf("PutNamed under a 2000-byte name: %v", err)
	}
}
