package nodeserver

import (
	"math/bits"
	"sync"
)

// minClassBits is the smallest buffer size class, 4 KiB (2^12): one page;
// smaller payloads share it.
const minClassBits = 12

// maxPooledBits is the largest pooled class, 8 MiB (2^23): a larger
// buffer is allocated for its request and left to the garbage collector.
// A pool holding 64 or 512 MiB buffers would keep them as long as the GC
// does not run — and a node's heap is mostly its RAM tier's arena, so the
// GC's target is twice that and it runs rarely: one large PUT would hold
// its buffer for minutes. Allocating (and zeroing) a large buffer costs
// about a tenth of receiving it over loopback TCP; objects of 8 MiB and
// less, the common sizes, still reuse buffers.
const maxPooledBits = 23

// bufPool recycles payload buffers by power-of-two size class, so a PUT
// payload or a copied SSD block is read into a buffer at most twice its size
// without allocating in steady state. Safe for concurrent use.
type bufPool struct {
	classes []sync.Pool // class i holds buffers of cap 1<<(minClassBits+i)
}

// newBufPool returns a pool for buffers up to max bytes (classes up to 8
// MiB: maxPooledBits).
func newBufPool(max int) *bufPool {
	n := classOf(min(max, 1<<maxPooledBits)) + 1
	return &bufPool{classes: make([]sync.Pool, n)}
}

// classOf returns the class of the smallest buffer holding n bytes.
func classOf(n int) int {
	if n <= 1<<minClassBits {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassBits
}

// get returns a buffer of length n (contents undefined). Put it back with put.
func (p *bufPool) get(n int) *[]byte {
	c := classOf(n)
	if c >= len(p.classes) { // larger than the pool was sized for: not pooled
		b := make([]byte, n)
		return &b
	}
	if v, ok := p.classes[c].Get().(*[]byte); ok {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<(minClassBits+c))
	return &b
}

// put recycles b, which get returned.
func (p *bufPool) put(b *[]byte) {
	c := classOf(cap(*b))
	if c >= len(p.classes) || cap(*b) != 1<<(minClassBits+c) {
		return
	}
	p.classes[c].Put(b)
}
