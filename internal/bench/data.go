package bench

import (
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/payload"
)

// benchTenant is the tenant every benchmark block is stored under.
const benchTenant = "bench"

// maxSources bounds the distinct payloads kept in memory: block id's bytes
// are sources[id % len(sources)], so a large on-disk data set needs 16
// blocks of memory, not its size. 16 is enough that neighbouring ids differ.
const maxSources = 16

// benchModel is the model part of a named object's name: an LMCache-style
// key names the model, the world size, the worker, the chunk hash and the
// format ("meta-llama/Llama-3.1-8B@1@0@5f3a…@bfloat16kv_bytes").
const benchModel = "meta-llama/Llama-3.1-8B"

// objectName is the name of object id of a named data set: an LMCache
// key whose chunk hash is 16 hex digits of a hash of id, so every name is
// objectNameLen bytes and names do not share long prefixes.
func objectName(id uint64) string {
	return fmt.Sprintf("%s@1@0@%016x@bfloat16kv_bytes", benchModel, block.Mix64(id+1))
}

// objectNameLen is the length of every objectName: the name bytes a named
// object stores in front of its payload, which the targets' tier sizing
// counts.
var objectNameLen = len(objectName(0))

// nameLen is the length of the names of spec's objects (0 for chain keys).
func nameLen(spec Spec) int {
	if spec.Named {
		return objectNameLen
	}
	return 0
}

// dataset is the blocks a target stores and reads: ids 0..n-1 of
// benchTenant (chain keys, or named objects objectName(id) when named),
// block id holding src[id%len(src)] with checksum sums[id].
type dataset struct {
	n     int
	src   [][]byte
	sums  []uint32
	names []string // nil for chain keys
}

func newDataset(n, size int, named bool) *dataset {
	d := &dataset{n: n, src: make([][]byte, min(n, maxSources)), sums: make([]uint32, n)}
	for i := range d.src {
		d.src[i] = payload.New(size, benchTenant, uint64(i))
	}
	if named {
		d.names = make([]string, n)
		for id := range d.names {
			d.names[id] = objectName(uint64(id))
		}
	}
	for id := range n {
		d.sums[id] = block.Checksum(d.key(uint64(id)), d.payload(uint64(id)))
	}
	return d
}

func (d *dataset) payload(id uint64) []byte { return d.src[id%uint64(len(d.src))] }

// key is block id's key: the chain key id, or the named key objectName(id).
func (d *dataset) key(id uint64) block.Key {
	if d.names != nil {
		return block.Named(benchTenant, d.names[id])
	}
	return key(id)
}

// what names block id in errors: "block 7", or "object "name" (block 7)".
func (d *dataset) what(id uint64) string {
	if d.names != nil {
		return fmt.Sprintf("object %q (block %d)", d.names[id], id)
	}
	return fmt.Sprintf("block %d", id)
}

func key(id uint64) block.Key { return block.Key{Tenant: benchTenant, ID: id} }

// mix picks the next request of a worker: a random id, and whether it writes.
type mix struct {
	rng   *rand.Rand
	n     int
	write float64
}

func newMix(worker, n int, write float64) mix {
	return mix{rng: rand.New(rand.NewPCG(uint64(worker), 0x6b76706f6f6c)), n: n, write: write}
}

func (m *mix) next() (id uint64, write bool) {
	id = uint64(m.rng.IntN(m.n))
	return id, m.write > 0 && m.rng.Float64() < m.write
}

// workDir returns spec.Dir, or a new temporary directory and a function
// that removes it.
func workDir(spec Spec, name string) (dir string, cleanup func() error, err error) {
	if spec.Dir != "" {
		if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
			return "", nil, fmt.Errorf("create directory %s: %w", spec.Dir, err)
		}
		d, err := os.MkdirTemp(spec.Dir, "kvpool-bench-"+name+"-")
		if err != nil {
			return "", nil, fmt.Errorf("create directory in %s: %w", spec.Dir, err)
		}
		return d, func() error { return os.RemoveAll(d) }, nil
	}
	d, err := os.MkdirTemp("", "kvpool-bench-"+name+"-")
	if err != nil {
		return "", nil, fmt.Errorf("create temporary directory: %w", err)
	}
	return d, func() error { return os.RemoveAll(d) }, nil
}

// checkLen reports a value of the wrong length.
func checkLen(what string, id uint64, got, want int) error {
	if got != want {
		return fmt.Errorf("%s %d: %d bytes, want %d: %w", what, id, got, want, errShort)
	}
	return nil
}
