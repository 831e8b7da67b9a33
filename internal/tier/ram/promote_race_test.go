package ram

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
)

// TestPutBeatsConcurrentCleanCopy: a Put must not lose to a clean copy
// (a promotion of an older lower-tier copy) that lands while the Put's
// bytes are being copied in. The store's promotion inserts with IfAbsent
// and Clean under its stripe lock, but a Put reaches the RAM tier without
// that lock: when the promotion reserved its slot after the Put did, the
// generation order alone made the Put lose and an acknowledged Put read
// back as the older version (found by the store's model test under load).
func TestPutBeatsConcurrentCleanCopy(t *testing.T) {
	r := mustOpen(t, small(64, 8))
	k := block.Key{Tenant: "t", ID: 7}
	old := []byte("old version from the lower tier")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the promoter: re-installs the old copy whenever k is absent
		defer wg.Done()
		how := InsertOptions{IfAbsent: true, NoEvict: true, Clean: true, SkipAdmission: true}
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := r.Insert(ctx, k, old, block.Checksum(k, old), how); err != nil &&
				!errors.Is(err, ErrExists) {
				t.Error(err)
				return
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	for i := range 5000 {
		p := []byte{byte(i), byte(i >> 8), 'n', 'e', 'w'}
		if err := r.Delete(ctx, k); err != nil && !errors.Is(err, kvpool.ErrNotFound) {
			t.Fatal(err)
		}
		put(t, r, k, p)
		got, _, err := r.Get(ctx, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, p) {
			t.Fatalf("iteration %d: Get after an acknowledged Put returned %q, want %q", i, got, p)
		}
	}
}
