package main

// The corrupt-copy hook of the multi-process integrity tests. The test
// binary, re-executed as kvpool (TestMain), reads corruptServedEnv and
// wraps the node's data plane with it through hooks.nodeBackend: a node
// whose RAM (or SSD) went bad under a good checksum, as another node's
// client meets it. The production binary has no such variable.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
)

// corruptServedEnv, set to a name prefix, makes the node serve every
// named object whose name starts with it with one bit flipped in the
// middle of its payload and its stored checksum unchanged; its own copy
// stays intact.
const corruptServedEnv = "KVPOOL_TEST_CORRUPT_SERVED"

// fullBackend is what the node's data plane serves: a Backend with the
// ACCESS op and SYNC.
type fullBackend interface {
	nodeserver.AccessBackend
	nodeserver.Syncer
}

// corruptServed returns the hook for prefix (corruptServedEnv's value;
// "" means none).
func corruptServed(prefix string) (func(nodeserver.Backend) nodeserver.Backend, error) {
	if prefix == "" {
		return nil, nil
	}
	if strings.ContainsAny(prefix, "\x00\r\n") {
		return nil, fmt.Errorf("%s=%q: want a name prefix of printable bytes", corruptServedEnv, prefix)
	}
	return func(inner nodeserver.Backend) nodeserver.Backend {
		fb, ok := inner.(fullBackend)
		if !ok {
			// A test binary built against a node whose backend lost
			// ACCESS or SYNC: the wrapper would hide them.
			panic(fmt.Sprintf("%s: the node's backend %T does not serve ACCESS and SYNC", corruptServedEnv, inner))
		}
		return corruptingBackend{fullBackend: fb, prefix: prefix}
	}, nil
}

// corruptingBackend serves a bit-flipped copy of the objects named with
// prefix (see corruptServedEnv); everything else passes through.
type corruptingBackend struct {
	fullBackend
	prefix string
}

func (b corruptingBackend) Acquire(ctx context.Context, k block.Key) (nodeserver.Ref, error) {
	ref, err := b.fullBackend.Acquire(ctx, k)
	if err != nil || k.Name == "" || !strings.HasPrefix(k.Name, b.prefix) {
		return ref, err
	}
	defer func() {
		if ref.Release != nil {
			ref.Release()
		}
	}()
	var p []byte
	if ref.File != nil {
		p = make([]byte, ref.Len)
		if _, err := ref.File.ReadAt(p, ref.Off); err != nil {
			return nodeserver.Ref{}, fmt.Errorf("%s: read %q to corrupt it: %w", corruptServedEnv, k.Name, err)
		}
	} else {
		for _, s := range ref.Payload {
			p = append(p, s...)
		}
	}
	if len(p) > 0 {
		p[len(p)/2] ^= 0x10
	}
	return nodeserver.Ref{Sum: ref.Sum, Payload: [][]byte{p}}, nil
}

func TestCorruptServedHook(t *testing.T) {
	if h, err := corruptServed(""); h != nil || err != nil {
		t.Fatalf(`corruptServed("") = %v, %v; want no hook`, h != nil, err)
	}
	if _, err := corruptServed("a\nb"); err == nil || !strings.Contains(err.Error(), corruptServedEnv) {
		t.Fatalf(`corruptServed("a\nb") = %v; want an error naming %s`, err, corruptServedEnv)
	}
	if h, err := corruptServed("bad-"); h == nil || err != nil {
		t.Fatalf(`corruptServed("bad-") = %v, %v; want a hook`, h != nil, err)
	}
}
