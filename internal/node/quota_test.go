package node

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
)

// TestNodeQuota: over the wire, a PUT over the tenant's quota gets the
// quota code, which the client sees as kvpool.ErrQuota; another tenant is unaffected; a DELETE frees quota;
// /metrics shows the tenant's resident bytes and rejections.
func TestNodeQuota(t *testing.T) {
	cfg := testConfig(filepath.Join(t.TempDir(), "ssd"))
	const size = 1000
	cfg.Quota.DefaultBytes = 3 * size
	cfg.Quota.Tenants = map[string]config.Size{"big": 100 * size}
	r := start(t, cfg, Options{})
	p := pool(t, r.n.Addr()) // tenant "t"
	big, err := nodeclient.NewPool(r.n.Addr(), nodeclient.PoolOptions{Dial: nodeclient.DialOptions{Tenant: "big"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { big.Close() })

	for i := range uint64(3) {
		if err := p.Put(ctx, i, payload(i, size)); err != nil {
			t.Fatalf("Put %d within quota: %v", i, err)
		}
	}
	err = p.Put(ctx, 3, payload(3, size))
	if !errors.Is(err, kvpool.ErrQuota) {
		t.Fatalf("Put over quota: %v, want kvpool.ErrQuota", err)
	}
	// A PUT's status carries a code, not the node's message (which names
	// quota and usage; see the store's tests): the client names the block.
	if !strings.Contains(err.Error(), "t/0000000000000003") || !strings.Contains(err.Error(), "quota exceeded") {
		t.Errorf("error %q does not name the block and the quota", err)
	}
	if _, _, err := p.Get(ctx, 3, nil); !errors.Is(err, kvpool.ErrNotFound) {
		t.Errorf("Get of the refused block: %v, want not found", err)
	}
	for i := range uint64(20) {
		if err := big.Put(ctx, i, payload(i, size)); err != nil {
			t.Fatalf("tenant big, Put %d: %v", i, err)
		}
	}
	if err := p.Delete(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Put(ctx, 3, payload(3, size)); err != nil {
		t.Fatalf("Put after a delete freed quota: %v", err)
	}

	_, text := httpGet(t, "http://"+r.n.AdminAddr()+"/metrics")
	for _, c := range []struct {
		name, labels string
		want         float64
	}{
		{"kvpool_node_tenant_resident_bytes", `tenant="t"`, 3 * size},
		{"kvpool_node_tenant_resident_bytes", `tenant="big"`, 20 * size},
		{"kvpool_node_tenant_quota_bytes", `tenant="t"`, 3 * size},
		{"kvpool_node_tenant_quota_bytes", `tenant="big"`, 100 * size},
		{"kvpool_node_tenant_quota_rejections_total", `tenant="t"`, 1},
		{"kvpool_node_tenant_quota_rejections_total", `tenant="big"`, 0},
	} {
		if got := metric(t, text, c.name, c.labels); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}
