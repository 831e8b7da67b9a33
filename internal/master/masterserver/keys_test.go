package masterserver

import (
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/meta"
)

// TestKeyOpsAuth: KEYINFO, SCAN and COUNT read a namespace and EXPIRE
// writes it, under the rules of LOCATE and PLACE: a tenant token touches
// only its own tenant, reads but does not EXPIRE in a shared namespace it
// does not write, and the cluster token may do anything. Every refusal is
// an ERROR (ErrUnauthorized) counted by op, and the connection carries on.
func TestKeyOpsAuth(t *testing.T) {
	m := newMaster(t, master.Options{})
	opts := tenantOptions()
	opts.Shared = []auth.Namespace{{Name: "public"}, {Name: "team", Writers: []string{"bob"}}}
	ts := start(t, m, opts, nil)
	a, pub, team := block.Named("alice", "x"), block.Named("public", "x"), block.Named("team", "x")
	inv := meta.Inventory{{Key: a, Tier: meta.TierRAM, Size: 1}, {Key: pub, Tier: meta.TierRAM, Size: 1}, {Key: team, Tier: meta.TierRAM, Size: 1}}
	if _, err := m.Register(meta.NodeInfo{ID: "n1", Addr: "127.0.0.1:1", RAMBytes: 1 << 30}, inv, meta.NodeUsage{}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	bob := dial(t, ts.addr, masterclient.Options{Token: []byte(bobToken)})
	alice := dial(t, ts.addr, masterclient.Options{Token: []byte(aliceToken)})
	ops := dial(t, ts.addr, masterclient.Options{Token: []byte(clusterToken)})

	refused := []struct {
		name string
		do   func() error
	}{
		{"KEYINFO of alice", func() error { _, err := bob.KeyInfo(ctx, []block.Key{a}, nil); return err }},
		{"EXPIRE of alice", func() error { _, err := bob.SetExpiry(ctx, []block.Key{a}, []int64{1}, false, nil); return err }},
		{"forced EXPIRE of alice", func() error { _, err := bob.SetExpiry(ctx, []block.Key{a}, []int64{0}, true, nil); return err }},
		{"SCAN of alice", func() error { _, _, err := bob.Scan(ctx, "alice", 0, 10); return err }},
		{"COUNT of alice", func() error { _, err := bob.CountKeys(ctx, "alice"); return err }},
		{"EXPIRE in read-only public", func() error { _, err := bob.SetExpiry(ctx, []block.Key{pub}, []int64{1}, false, nil); return err }},
		{"EXPIRE in team by alice", func() error { _, err := alice.SetExpiry(ctx, []block.Key{team}, []int64{1}, false, nil); return err }},
	}
	for _, r := range refused {
		t.Run(r.name, func(t *testing.T) {
			if err := r.do(); !errors.Is(err, masterclient.ErrUnauthorized) {
				t.Fatalf("%v; want ErrUnauthorized", err)
			}
			if n, err := bob.CountKeys(ctx, "bob"); err != nil || n != 0 {
				t.Fatalf("bob: COUNT of bob after the refusal = %d, %v", n, err)
			}
		})
	}
	if infos, err := m.KeyInfo([]block.Key{a}, nil); err != nil || infos[0].ExpireAt != 0 || !infos[0].Visible {
		t.Fatalf("alice's key after the refusals: %+v, %v; want untouched", infos, err)
	}

	// What the grants allow.
	if infos, err := bob.KeyInfo(ctx, []block.Key{pub}, nil); err != nil || !infos[0].Visible {
		t.Errorf("bob: KEYINFO in public = %+v, %v", infos, err)
	}
	if _, names, err := bob.Scan(ctx, "public", 0, 10); err != nil || !slices.Equal(names, []string{"x"}) {
		t.Errorf("bob: SCAN of public = %v, %v", names, err)
	}
	if n, err := bob.CountKeys(ctx, "public"); err != nil || n != 1 {
		t.Errorf("bob: COUNT of public = %d, %v", n, err)
	}
	if ok, err := bob.SetExpiry(ctx, []block.Key{team}, []int64{1 << 50}, false, nil); err != nil || !ok[0] {
		t.Errorf("bob: EXPIRE in team, which he writes = %v, %v", ok, err)
	}
	if ok, err := alice.SetExpiry(ctx, []block.Key{a}, []int64{1 << 50}, false, nil); err != nil || !ok[0] {
		t.Errorf("alice: EXPIRE of her key = %v, %v", ok, err)
	}
	if ok, err := ops.SetExpiry(ctx, []block.Key{pub}, []int64{1}, false, nil); err != nil || !ok[0] {
		t.Errorf("cluster token: EXPIRE in public = %v, %v", ok, err)
	}
	if _, names, err := ops.Scan(ctx, "public", 0, 10); err != nil || len(names) != 0 {
		t.Errorf("cluster token: SCAN of public after its key expired = %v, %v", names, err)
	}

	code, body := httpGet(t, ts.admin+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	counter := func(name, op string) int {
		re := regexp.MustCompile(name + `\{op="` + op + `"\} (\d+)`)
		m := re.FindStringSubmatch(body)
		if m == nil {
			t.Errorf("/metrics has no %s for %s", name, op)
			return -1
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	forbidden := map[string]int{"KEYINFO": 1, "EXPIRE": 4, "SCAN": 1, "COUNT": 1}
	for op, n := range forbidden {
		if got := counter("kvpool_masterserver_requests_forbidden_total", op); got != n {
			t.Errorf("forbidden %s = %d; want %d", op, got, n)
		}
	}
	served := map[string]int{"KEYINFO": 2, "EXPIRE": 7, "SCAN": 3, "COUNT": 1 + len(refused) + 1}
	for op, n := range served {
		if got := counter("kvpool_masterserver_requests_total", op); got != n {
			t.Errorf("requests %s = %d; want %d", op, got, n)
		}
	}
}
