// Package nodeservertest provides what tests and benchmarks of the node data
// plane need: Backend, an in-memory nodeserver.Backend with an optional
// file tier (so the sendfile path runs on real files) and fault injection,
// and Start, which runs a nodeserver.Server on a loopback listener for the
// length of a test.
package nodeservertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/wire"
	"github.com/kvpool/kvpool/internal/tier"
)

// Backend is an in-memory nodeserver.Backend. Blocks are stored in RAM by
// Put; Spill moves a block to the file tier, a real file in the directory
// given to NewBackend, from which the server sends it with sendfile. A
// payload is never modified in place (a Put or FlipBit replaces it), so a
// pinned block stays valid. Safe for concurrent use.
type Backend struct {
	dir  string
	pins atomic.Int64

	mu      sync.Mutex
	blocks  map[block.Key]*stored
	file    *os.File // the file tier, opened by the first Spill
	fileEnd int64
	ram     tier.Stats
	disk    tier.Stats
	access  []Access
}

// Access is one ACCESS entry the backend served (see Backend.Accesses).
type Access struct {
	Key  block.Key
	Hint wire.Hint
	// Found is false for a touch of a block not in RAM (answered not
	// found) and for a put that failed.
	Found bool
}

// stored is one block: in RAM (payload) or in the file (off, n).
type stored struct {
	payload []byte
	sum     uint32
	inFile  bool
	off     int64
	n       int
}

var _ nodeserver.AccessBackend = (*Backend)(nil)

// NewBackend returns an empty backend whose file tier lives in dir ("" for
// a RAM-only backend, on which Spill fails).
func NewBackend(dir string) *Backend {
	return &Backend{dir: dir, blocks: map[block.Key]*stored{}}
}

// Acquire pins k's block (see nodeserver.Backend).
func (b *Backend) Acquire(ctx context.Context, k block.Key) (nodeserver.Ref, error) {
	if err := ctx.Err(); err != nil {
		return nodeserver.Ref{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.blocks[k]
	if !ok {
		b.ram.Misses++
		return nodeserver.Ref{}, fmt.Errorf("nodeservertest: acquire %s: %w", k, kvpool.ErrNotFound)
	}
	b.pins.Add(1)
	var once sync.Once
	ref := nodeserver.Ref{Sum: s.sum, Release: func() { once.Do(func() { b.pins.Add(-1) }) }}
	if s.inFile {
		b.disk.Hits++
		b.disk.BytesOut += uint64(s.n)
		ref.File, ref.Off, ref.Len = b.file, s.off, s.n
	} else {
		b.ram.Hits++
		b.ram.BytesOut += uint64(len(s.payload))
		ref.Payload = pieces(s.payload)
	}
	return ref, nil
}

// pieces splits p into up to three pieces, as a RAM tier's chunks would
// hand it out, so the server's scatter-gather send is always exercised.
func pieces(p []byte) [][]byte {
	if len(p) < 3 {
		return [][]byte{p}
	}
	a, b := len(p)/3, 2*len(p)/3
	return [][]byte{p[:a], p[a:b], p[b:]}
}

// Put verifies sum and stores a copy of payload in RAM.
func (b *Backend) Put(ctx context.Context, k block.Key, payload []byte, sum uint32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !block.Verify(k, payload, sum) {
		b.mu.Lock()
		b.ram.Corruptions++
		b.mu.Unlock()
		return fmt.Errorf("nodeservertest: put %s: checksum %08x does not match the %d-byte payload: %w", k, sum, len(payload), kvpool.ErrCorrupt)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.blocks[k] = &stored{payload: append([]byte(nil), payload...), sum: sum}
	b.ram.BytesIn += uint64(len(payload))
	return nil
}

// PutHinted is Put, logged with its hint (see Accesses).
func (b *Backend) PutHinted(ctx context.Context, k block.Key, payload []byte, sum uint32, h wire.Hint) error {
	err := b.Put(ctx, k, payload, sum)
	b.mu.Lock()
	b.access = append(b.access, Access{Key: k, Hint: h, Found: err == nil})
	b.mu.Unlock()
	return err
}

// Touch logs the access (see Accesses); it returns kvpool.ErrNotFound when
// k is not in RAM (absent, or spilled to the file tier).
func (b *Backend) Touch(ctx context.Context, k block.Key, h wire.Hint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.blocks[k]
	found := ok && !s.inFile
	b.access = append(b.access, Access{Key: k, Hint: h, Found: found})
	if !found {
		return fmt.Errorf("nodeservertest: touch %s: not in RAM: %w", k, kvpool.ErrNotFound)
	}
	return nil
}

// Accesses returns the ACCESS entries served so far, in order.
func (b *Backend) Accesses() []Access {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Access(nil), b.access...)
}

// Store puts payload under k with its correct checksum (for seeding tests).
func (b *Backend) Store(k block.Key, payload []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.blocks[k] = &stored{payload: append([]byte(nil), payload...), sum: block.Checksum(k, payload)}
}

// Exists reports whether k is stored, touching no counters.
func (b *Backend) Exists(k block.Key) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.blocks[k]
	return ok
}

// Delete removes k.
func (b *Backend) Delete(ctx context.Context, k block.Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.blocks[k]; !ok {
		return fmt.Errorf("nodeservertest: delete %s: %w", k, kvpool.ErrNotFound)
	}
	delete(b.blocks, k)
	return nil
}

// Stats returns the "ram" and "file" tiers' counters.
func (b *Backend) Stats() []wire.TierStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	ram, disk := b.ram, b.disk
	for k, s := range b.blocks {
		// Held bytes: the payload and the name kept with it.
		if s.inFile {
			disk.Blocks++
			disk.Bytes += int64(s.n)
			disk.HeldBytes += int64(s.n + len(k.Name))
		} else {
			ram.Blocks++
			ram.Bytes += int64(len(s.payload))
			ram.HeldBytes += int64(len(s.payload) + len(k.Name))
		}
	}
	return []wire.TierStats{{Name: "ram", Stats: ram}, {Name: "file", Stats: disk}}
}

// Spill moves k's block to the file tier.
func (b *Backend) Spill(k block.Key) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.blocks[k]
	switch {
	case !ok:
		return fmt.Errorf("nodeservertest: spill %s: %w", k, kvpool.ErrNotFound)
	case s.inFile:
		return nil
	case b.dir == "":
		return fmt.Errorf("nodeservertest: spill %s: backend has no file directory", k)
	}
	if b.file == nil {
		f, err := os.OpenFile(filepath.Join(b.dir, "blocks"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("nodeservertest: spill %s: %w", k, err)
		}
		b.file = f
	}
	if _, err := b.file.WriteAt(s.payload, b.fileEnd); err != nil {
		return fmt.Errorf("nodeservertest: spill %s: write %d bytes at %d: %w", k, len(s.payload), b.fileEnd, err)
	}
	b.blocks[k] = &stored{sum: s.sum, inFile: true, off: b.fileEnd, n: len(s.payload)}
	b.fileEnd += int64(len(s.payload))
	b.disk.BytesIn += uint64(len(s.payload))
	return nil
}

// FlipBit flips bit i of k's stored payload, keeping its stored checksum: a
// bit flip at rest, which the client must detect.
func (b *Backend) FlipBit(k block.Key, i int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.blocks[k]
	if !ok {
		return fmt.Errorf("nodeservertest: flip bit of %s: %w", k, kvpool.ErrNotFound)
	}
	n := len(s.payload)
	if s.inFile {
		n = s.n
	}
	if i < 0 || i >= 8*n {
		return fmt.Errorf("nodeservertest: flip bit %d of %s: the payload has %d bits", i, k, 8*n)
	}
	if !s.inFile {
		p := append([]byte(nil), s.payload...) // never modify a payload in place
		p[i/8] ^= 1 << (i % 8)
		b.blocks[k] = &stored{payload: p, sum: s.sum}
		return nil
	}
	var c [1]byte
	at := s.off + int64(i/8)
	if _, err := b.file.ReadAt(c[:], at); err != nil {
		return fmt.Errorf("nodeservertest: flip bit of %s: %w", k, err)
	}
	c[0] ^= 1 << (i % 8)
	if _, err := b.file.WriteAt(c[:], at); err != nil {
		return fmt.Errorf("nodeservertest: flip bit of %s: %w", k, err)
	}
	return nil
}

// Pins returns the number of blocks acquired and not yet released.
func (b *Backend) Pins() int64 { return b.pins.Load() }

// Len returns the number of blocks stored.
func (b *Backend) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.blocks)
}

// Sync flushes the file tier to disk (so a benchmark does not measure
// writeback).
func (b *Backend) Sync() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.file == nil {
		return nil
	}
	return b.file.Sync()
}

// Close closes the file tier.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.file == nil {
		return nil
	}
	err := b.file.Close()
	b.file = nil
	return err
}

// Start runs a server configured by opts on a new 127.0.0.1 listener until
// the test ends, and returns it with its address. At cleanup it stops the
// server, waits for Serve to return, and fails the test if Serve returned an
// error or, when opts.Backend is a *Backend, if a block is still pinned.
func Start(tb testing.TB, opts nodeserver.Options) (*nodeserver.Server, string) {
	tb.Helper()
	srv, err := nodeserver.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, nodeserver.ErrClosed) {
			tb.Errorf("Serve: %v", err)
		}
		if b, ok := opts.Backend.(*Backend); ok {
			if n := b.Pins(); n != 0 {
				tb.Errorf("%d blocks still pinned after the server stopped", n)
			}
		}
	})
	return srv, ln.Addr().String()
}
