package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestCompareWithRedisMissing: without a redis-server binary the redis
// point is skipped with an install hint, and the warning says so.
func TestCompareWithRedisMissing(t *testing.T) {
	var warn bytes.Buffer
	cs, err := CompareWithRedis(context.Background(), CompareOptions{
		BlockSizes: []int{16 << 10}, Conns: 1, Against: []string{VsRedis},
	}, "kvpool-no-such-redis-server", &warn)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || !strings.Contains(cs[0].Skipped, "kvpool-no-such-redis-server not installed") {
		t.Fatalf("comparisons %+v, want the redis point skipped as not installed", cs)
	}
	if !strings.Contains(warn.String(), "skipping redis") {
		t.Errorf("warning %q", warn.String())
	}
}
