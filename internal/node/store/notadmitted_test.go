package store

import (
	"context"
	"errors"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier/ram"
)

// TestNotAdmittedWithoutSSDIsFull: a RAM-only store whose admission
// policy declines a block reports a full store (which the node answers as
// CodeFull), still recognisable as a refusal by admission — not an
// unclassified failure the node would log and answer as internal.
func TestNotAdmittedWithoutSSDIsFull(t *testing.T) {
	s, err := Open(context.Background(), Options{RAM: ram.Options{BlockSize: 64, CapacityBytes: 64 * 8, Admission: "second-hit"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := block.Key{Tenant: "t", ID: 1}
	p := []byte("payload")
	_, err = s.Put(context.Background(), k, p, block.Checksum(k, p))
	if !errors.Is(err, kvpool.ErrFull) || !errors.Is(err, ram.ErrNotAdmitted) {
		t.Fatalf("first Put under second-hit admission without SSD = %v; want kvpool.ErrFull and ram.ErrNotAdmitted", err)
	}
	if _, err := s.Put(context.Background(), k, p, block.Checksum(k, p)); err != nil {
		t.Fatalf("second Put (second hit) = %v; want it admitted", err)
	}
}
