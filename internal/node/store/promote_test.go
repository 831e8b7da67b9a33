package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier/tiertest"
	"github.com/kvpool/kvpool/internal/vfs"
)

// fakeClock is a Clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestLocalPromoter: the verdicts, in the order the checks run.
func TestLocalPromoter(t *testing.T) {
	room := Load{RAMUsed: 0.5, Queued: 0, QueueCap: 10}
	type step struct {
		id      uint64
		load    Load
		advance time.Duration // before the step
		want    Verdict
	}
	tests := []struct {
		name  string
		opts  PromotionOptions
		steps []step
	}{
		{"second touch", PromotionOptions{MaxPerHeartbeat: 10}, []step{
			{1, room, 0, RejectFrequency},
			{2, room, 0, RejectFrequency},
			{1, room, 0, Promote},
			{1, room, 0, Promote},
		}},
		{"threshold 3", PromotionOptions{Threshold: 3, MaxPerHeartbeat: 10}, []step{
			{1, room, 0, RejectFrequency},
			{1, room, 0, RejectFrequency},
			{1, room, 0, Promote},
		}},
		{"watermark", PromotionOptions{Threshold: 1, Watermark: 0.8, MaxPerHeartbeat: 10}, []step{
			{1, Load{RAMUsed: 0.8, QueueCap: 10}, 0, RejectWatermark},
			{1, Load{RAMUsed: 0.79, QueueCap: 10}, 0, Promote},
		}},
		{"cap", PromotionOptions{Threshold: 1, MaxPerHeartbeat: 10}, []step{
			{1, Load{Queued: 10, QueueCap: 10}, 0, RejectCap},
			{1, Load{Queued: 9, QueueCap: 10}, 0, Promote},
		}},
		{"rate", PromotionOptions{Threshold: 1, MaxPerHeartbeat: 2, Heartbeat: time.Second}, []step{
			{1, room, 0, Promote},
			{2, room, 0, Promote},
			{3, room, 999 * time.Millisecond, RejectRate},
			{3, room, time.Millisecond, Promote}, // a new interval
			{4, room, 0, Promote},
			{5, room, 0, RejectRate},
			{5, room, -time.Hour, Promote}, // the clock went back: a new interval
		}},
		{"frequency counts every hit", PromotionOptions{MaxPerHeartbeat: 10}, []step{
			{1, Load{RAMUsed: 1, QueueCap: 10}, 0, RejectFrequency},
			{1, Load{RAMUsed: 1, QueueCap: 10}, 0, RejectWatermark}, // second hit, but no room
			{1, room, 0, Promote},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			p, err := NewLocalPromoter(tt.opts, 1000, clock)
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tt.steps {
				clock.Advance(st.advance)
				if got := p.Consider(key(st.id), st.load); got != st.want {
					t.Fatalf("step %d (block %d, %+v): %v, want %v", i, st.id, st.load, got, st.want)
				}
			}
		})
	}
	if _, err := NewLocalPromoter(PromotionOptions{Threshold: -1}, 10, nil); err == nil {
		t.Error("NewLocalPromoter accepted a negative threshold")
	}
}

// demoted opens a store with SSD whose blocks 0..n-1 were demoted to SSD
// and whose RAM (ramSlots slots) has free slots left free: the last
// ramSlots blocks put are deleted from RAM.
func demoted(t *testing.T, n, ramSlots int, o Options) *Store {
	t.Helper()
	s := mustOpen(t, o)
	for i := range uint64(n + ramSlots) {
		put(t, s, key(i), tiertest.Payload(i, 1, 100))
	}
	for i := uint64(n); i < uint64(n+ramSlots); i++ {
		if err := s.Delete(ctx, key(i)); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Demotions != uint64(n) || st.RAM.Blocks != 0 {
		t.Fatalf("setup: %d demotions, %d blocks in RAM", st.Demotions, st.RAM.Blocks)
	}
	return s
}

// TestPromotion: a block read twice from SSD is promoted and then served
// from RAM; a block read once is not.
func TestPromotion(t *testing.T) {
	o := testOpts(256, 8, vfs.NewMem(), 32)
	o.Promotion = PromotionOptions{MaxPerHeartbeat: 100}
	var results []PromotionResult
	o.OnPromotion = func(r PromotionResult) { results = append(results, r) }
	s := demoted(t, 4, 8, o)
	want := tiertest.Payload(1, 1, 100)
	for read := 1; read <= 3; read++ {
		from := mustGet(t, s, key(1), want)
		if err := s.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		loc := s.Locate([]block.Key{key(1)})[0]
		switch read {
		case 1:
			if from != InSSD || loc != InSSD {
				t.Fatalf("first read from %v, then in %v; want ssd, ssd (not promoted)", from, loc)
			}
		case 2:
			if from != InSSD || loc != InRAM|InSSD {
				t.Fatalf("second read from %v, then in %v; want ssd, ram+ssd (promoted, SSD copy kept)", from, loc)
			}
		case 3:
			if from != InRAM {
				t.Fatalf("third read from %v, want ram", from)
			}
		}
	}
	mustGet(t, s, key(2), tiertest.Payload(2, 1, 100)) // read once
	if err := s.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if loc := s.Locate([]block.Key{key(2)})[0]; loc != InSSD {
		t.Fatalf("block read once is in %v, want ssd only", loc)
	}
	st := s.Stats().Promotion
	if st.Admitted != 1 || st.Completed != 1 || st.CompletedBytes != 100 || st.RejectedFrequency != 2 || st.InFlight != 0 {
		t.Fatalf("PromotionStats %+v", st)
	}
	if len(results) != 1 || results[0].Key != key(1) || results[0].Outcome != Completed || results[0].Bytes != 100 {
		t.Fatalf("OnPromotion saw %+v", results)
	}
	// Evicting the promoted copy again writes nothing: SSD still has it.
	for i := uint64(100); i < 108; i++ {
		put(t, s, key(i), tiertest.Payload(i, 1, 100))
	}
	if st := s.Stats(); st.DemotionsClean != 1 || st.Demotions != 4 {
		t.Fatalf("after re-evicting the promoted block: %d clean, %d written demotions; want 1, 4", st.DemotionsClean, st.Demotions)
	}
	mustGet(t, s, key(1), want)
}

// TestPromotionLimits: under a burst of hot SSD reads, promotion respects
// the heartbeat budget, the RAM watermark and the queue cap. Runs in a
// synctest bubble, whose fake clock the store reads through time.Now.
func TestPromotionLimits(t *testing.T) {
	const hot = 20
	tests := []struct {
		name  string
		opts  PromotionOptions
		block bool // the worker blocks after its first task
		// After every hot block was read twice:
		admitted, rejected uint64
		rejectedBy         func(PromotionStats) uint64
		// After an interval passes and every hot block is read again:
		admittedLater uint64
	}{
		{
			name:     "rate",
			opts:     PromotionOptions{MaxPerHeartbeat: 3, Heartbeat: time.Second},
			admitted: 3, rejected: hot - 3,
			rejectedBy:    func(p PromotionStats) uint64 { return p.RejectedRate },
			admittedLater: 6,
		},
		{
			// RAM has 20 slots, 10 in use: promotions stop at 12 (60%).
			name:     "watermark",
			opts:     PromotionOptions{MaxPerHeartbeat: 100, Watermark: 0.6},
			admitted: 2, rejected: hot - 2,
			rejectedBy:    func(p PromotionStats) uint64 { return p.RejectedWatermark },
			admittedLater: 2,
		},
		{
			// One task runs and blocks; two wait; the rest find the queue
			// full. Once the worker runs freely, the default watermark
			// (90% of 20 slots) stops promotions at 18 slots in use.
			name:     "cap",
			opts:     PromotionOptions{MaxPerHeartbeat: 100, QueueCap: 2},
			block:    true,
			admitted: 3, rejected: hot - 3,
			rejectedBy:    func(p PromotionStats) uint64 { return p.RejectedCap },
			admittedLater: 8,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := testOpts(256, 20, vfs.NewMem(), 64)
				o.Promotion = tt.opts
				gate := make(chan struct{})
				if tt.block {
					o.OnPromotion = func(PromotionResult) { <-gate }
				}
				s, err := Open(ctx, o)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					select {
					case <-gate:
					default:
						close(gate)
					}
					s.Close()
				})
				for i := range uint64(hot + 20) { // 0..19 demoted
					put(t, s, key(i), tiertest.Payload(i, 1, 100))
				}
				for i := uint64(hot + 10); i < hot+20; i++ { // RAM: 10 of 20 slots in use
					if err := s.Delete(ctx, key(i)); err != nil {
						t.Fatal(err)
					}
				}
				readAll := func() {
					for i := range uint64(hot) {
						if _, _, _, err := s.Get(ctx, key(i), nil); err != nil {
							t.Fatal(err)
						}
						synctest.Wait() // the worker has done what it can
					}
				}
				readAll()
				readAll()
				st := s.Stats().Promotion
				if st.RejectedFrequency != hot {
					t.Errorf("first reads: %d rejected by frequency, want %d", st.RejectedFrequency, hot)
				}
				if st.Admitted != tt.admitted || tt.rejectedBy(st) != tt.rejected {
					t.Fatalf("after the burst: %+v; want %d admitted, %d rejected", st, tt.admitted, tt.rejected)
				}
				if w := s.RAMWatermark(); tt.opts.Watermark > 0 && w > tt.opts.Watermark {
					t.Fatalf("RAM at %v, above the promotion watermark %v", w, tt.opts.Watermark)
				}
				time.Sleep(time.Second) // a new heartbeat interval
				close(gate)
				synctest.Wait()
				readAll()
				if st := s.Stats().Promotion; st.Admitted != tt.admittedLater {
					t.Fatalf("after another interval: %+v; want %d admitted", st, tt.admittedLater)
				}
				if err := s.WaitIdle(ctx); err != nil {
					t.Fatal(err)
				}
				st = s.Stats().Promotion
				if st.Completed+st.AlreadyInRAM != st.Admitted || st.Failed+st.Expired != 0 || st.InFlight != 0 {
					t.Fatalf("at rest: %+v", st)
				}
				if err := s.Check(); err != nil {
					t.Error(err)
				}
			})
		})
	}
}

// TestPromoteTasks: Store.Promote executes tasks decided elsewhere, and
// reports every outcome.
func TestPromoteTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := testOpts(256, 8, vfs.NewMem(), 32)
		o.Promotion = PromotionOptions{Off: true, Heartbeat: time.Second, TaskTTL: 2 * time.Second}
		results := make(chan PromotionResult, 16)
		gate := make(chan struct{}, 16)
		o.OnPromotion = func(r PromotionResult) {
			results <- r
			<-gate
		}
		s, err := Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		for i := range uint64(12) { // 0..3 demoted; 4..11 fill RAM
			put(t, s, key(i), tiertest.Payload(i, 1, 100))
		}
		mustGet(t, s, key(0), tiertest.Payload(0, 1, 100)) // Off: never promoted locally
		synctest.Wait()
		if st := s.Stats().Promotion; st.Admitted != 0 || st.RejectedFrequency != 0 {
			t.Fatalf("Off promoter decided something: %+v", st)
		}
		// 0: RAM is full (fails); 5: in RAM already; 99: absent (fails).
		n, err := s.Promote(ctx, []block.Key{key(0), key(5), key(99)})
		if err != nil || n != 3 {
			t.Fatalf("Promote = %d, %v", n, err)
		}
		for range 3 {
			gate <- struct{}{}
		}
		synctest.Wait()
		for _, id := range []uint64{10, 11} { // make room for two
			if err := s.Delete(ctx, key(id)); err != nil {
				t.Fatal(err)
			}
		}
		// 1 runs now and blocks in OnPromotion; 2 waits past its TTL.
		if n, err := s.Promote(ctx, []block.Key{key(1), key(2)}); err != nil || n != 2 {
			t.Fatalf("Promote = %d, %v", n, err)
		}
		synctest.Wait()
		time.Sleep(3 * time.Second)
		gate <- struct{}{}
		gate <- struct{}{}
		synctest.Wait()
		close(results)
		var got []string
		for r := range results {
			s := fmt.Sprintf("%d:%v", r.Key.ID, r.Outcome)
			if r.Outcome == Failed && r.Err == nil {
				s += "(no error)"
			}
			got = append(got, s)
		}
		want := "[0:failed 5:already in RAM 99:failed 1:completed 2:expired]"
		if fmt.Sprint(got) != want {
			t.Fatalf("outcomes %v, want %s", got, want)
		}
		if loc := s.Locate([]block.Key{key(1), key(2)}); fmt.Sprint(loc) != "[ram+ssd ssd]" {
			t.Fatalf("Locate = %v", loc)
		}
		st := s.Stats().Promotion
		if st.Admitted != 5 || st.Completed != 1 || st.Failed != 2 || st.Expired != 1 || st.AlreadyInRAM != 1 {
			t.Fatalf("PromotionStats %+v", st)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
	s := mustOpen(t, testOpts(256, 8, nil, 0))
	if _, err := s.Promote(ctx, []block.Key{key(1)}); !errors.Is(err, ErrNoSSD) {
		t.Errorf("Promote without SSD = %v, want ErrNoSSD", err)
	}
}

// TestPromoteCap: Promote queues no more than the cap.
func TestPromoteCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := testOpts(256, 8, vfs.NewMem(), 32)
		o.Promotion = PromotionOptions{Off: true, QueueCap: 3}
		gate := make(chan struct{})
		o.OnPromotion = func(PromotionResult) { <-gate }
		s, err := Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		// First park the worker in the report of one task, so that it
		// takes nothing off the queue while the burst is queued: left
		// running, it could dequeue the burst's first key mid-call and
		// make room for a fourth (a CI run saw Promote = 4).
		if n, err := s.Promote(ctx, []block.Key{key(0)}); err != nil || n != 1 {
			t.Fatalf("Promote of one key = %d, %v", n, err)
		}
		synctest.Wait() // the worker ran key 0 and waits in OnPromotion
		keys := []block.Key{key(1), key(2), key(3), key(4), key(5)}
		n, err := s.Promote(ctx, keys)
		if err != nil || n != 3 {
			t.Fatalf("Promote = %d, %v; want 3 queued", n, err)
		}
		if st := s.Stats().Promotion; st.RejectedCap != 2 || st.InFlight != 3 {
			t.Fatalf("PromotionStats %+v", st)
		}
		close(gate)
		if err := s.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		if st := s.Stats().Promotion; st.Failed != 4 || st.InFlight != 0 {
			t.Fatalf("PromotionStats %+v: want 4 failed (absent keys)", st)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCloseAbandonsQueue: Close stops the worker while tasks wait, and
// leaves no goroutine behind (TestMain's goleak check).
func TestCloseAbandonsQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := testOpts(256, 8, vfs.NewMem(), 32)
		o.Promotion.Off = true
		gate := make(chan struct{})
		o.OnPromotion = func(PromotionResult) { <-gate }
		s, err := Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Promote(ctx, []block.Key{key(1), key(2), key(3)}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		closed := make(chan error)
		go func() { closed <- s.Close() }()
		synctest.Wait()
		close(gate) // the running task's callback returns; the worker stops
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if st := s.Stats().Promotion; st.Failed != 1 || st.InFlight != 0 {
			t.Fatalf("PromotionStats %+v after Close", st)
		}
	})
}
