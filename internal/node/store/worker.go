package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier/ram"
)

// considerPromotion shows an SSD hit of k to the promoter and queues the
// promotion it admits.
func (s *Store) considerPromotion(k block.Key) {
	c := s.ram.Counters()
	s.mu.Lock()
	queued := len(s.queue) + s.running
	s.mu.Unlock()
	load := Load{
		RAMUsed:  float64(c.UsedSlots+queued) / float64(c.Slots),
		Queued:   queued,
		QueueCap: s.popts.QueueCap,
	}
	switch s.prom.Consider(k, load) {
	case Promote:
		s.enqueue(k)
	case RejectFrequency:
		s.c.rejFrequency.Add(1)
	case RejectWatermark:
		s.c.rejWatermark.Add(1)
	case RejectCap:
		s.c.rejCap.Add(1)
	case RejectRate:
		s.c.rejRate.Add(1)
	}
}

// enqueue queues a promotion of k, counting it as admitted, or as
// rejected by cap when the queue is full.
func (s *Store) enqueue(k block.Key) bool {
	s.mu.Lock()
	if len(s.queue)+s.running >= s.popts.QueueCap {
		s.mu.Unlock()
		s.c.rejCap.Add(1)
		return false
	}
	s.queue = append(s.queue, task{key: k, at: s.clock.Now().UnixNano()})
	s.mu.Unlock()
	s.c.admitted.Add(1)
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return true
}

// Promote queues promotion tasks decided elsewhere (by the master): each
// key is copied from SSD into a free RAM slot by the worker, which
// reports each outcome to Options.OnPromotion and in Stats. It returns how
// many keys were queued; the others were rejected because the queue was
// full (counted as rejected by cap).
func (s *Store) Promote(ctx context.Context, keys []block.Key) (int, error) {
	s.life.Lock()
	if s.closed {
		s.life.Unlock()
		return 0, fmt.Errorf("store: promote %d keys: %w", len(keys), kvpool.ErrClosed)
	}
	s.ops.Add(1)
	s.life.Unlock()
	defer s.ops.Done()
	if s.ssd == nil {
		return 0, fmt.Errorf("store: promote %d keys: %w", len(keys), ErrNoSSD)
	}
	n := 0
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("store: promote: queued %d of %d keys: %w", n, len(keys), err)
		}
		if s.enqueue(k) {
			n++
		}
	}
	return n, nil
}

// WaitIdle waits until no promotion task is waiting or running, the
// context ends, or the store closes.
func (s *Store) WaitIdle(ctx context.Context) error {
	s.mu.Lock()
	if len(s.queue) == 0 && s.running == 0 {
		s.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	s.idle = append(s.idle, ch)
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("store: wait for promotions: %w", ctx.Err())
	}
}

// work is the promotion worker: it runs queued tasks one at a time until
// Close.
func (s *Store) work(ctx context.Context) {
	defer close(s.done)
	for {
		select {
		case <-s.quit:
			return
		case <-s.kick:
		}
		for {
			s.mu.Lock()
			if len(s.queue) == 0 {
				for _, ch := range s.idle {
					close(ch)
				}
				s.idle = nil
				s.mu.Unlock()
				break
			}
			t := s.queue[0]
			s.queue[0] = task{}
			s.queue = s.queue[1:]
			s.running = 1
			s.mu.Unlock()

			res := s.execute(ctx, t)
			s.count(res)

			s.mu.Lock()
			s.running = 0
			s.mu.Unlock()
			if s.onPromotion != nil {
				s.onPromotion(res)
			}
			select {
			case <-s.quit:
				return
			default:
			}
		}
	}
}

// execute runs one promotion task.
func (s *Store) execute(ctx context.Context, t task) PromotionResult {
	res := PromotionResult{Key: t.key}
	if waited := time.Duration(s.clock.Now().UnixNano() - t.at); waited > s.popts.TaskTTL {
		res.Outcome = Expired
		return res
	}
	mu := s.stripe(t.key)
	mu.Lock()
	defer mu.Unlock()
	if s.ram.Contains(t.key) {
		res.Outcome = AlreadyInRAM
		return res
	}
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	out, sum, err := s.ssd.Get(ctx, t.key, *bp)
	if err != nil {
		if errors.Is(err, kvpool.ErrCorrupt) {
			s.c.ssdCorruptions.Add(1)
		}
		res.Outcome, res.Err = Failed, fmt.Errorf("store: promote %s: read SSD: %w", t.key, err)
		return res
	}
	*bp = out[:0]
	how := ram.InsertOptions{IfAbsent: true, NoEvict: true, Clean: true, SkipAdmission: true}
	if _, err := s.ram.Insert(ctx, t.key, out, sum, how); err != nil {
		if errors.Is(err, ram.ErrExists) {
			res.Outcome = AlreadyInRAM
			return res
		}
		res.Outcome, res.Err = Failed, fmt.Errorf("store: promote %s: %w", t.key, err)
		return res
	}
	res.Outcome, res.Bytes = Completed, len(out)
	s.emit(Event{Kind: EventPromoted, Key: t.key, Size: len(out), Sum: sum})
	return res
}

func (s *Store) count(res PromotionResult) {
	switch res.Outcome {
	case Completed:
		s.c.completed.Add(1)
		s.c.completedBytes.Add(uint64(res.Bytes))
	case Failed:
		s.c.failed.Add(1)
	case Expired:
		s.c.expired.Add(1)
	case AlreadyInRAM:
		s.c.alreadyInRAM.Add(1)
	}
}
