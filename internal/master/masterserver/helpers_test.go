package masterserver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/meta"
)

// Serve, ServeAdmin and the clients start goroutines; all must be joined.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testServer is a running server on loopback.
type testServer struct {
	*Server
	addr, admin string
	stop        func()
}

// start runs a server over m on ln (a new loopback listener when nil) and
// its admin endpoints; stop (also run at cleanup) closes it and waits.
func start(t testing.TB, m *master.Master, opts Options, ln net.Listener) *testServer {
	t.Helper()
	s, err := New(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 2)
	go func() { errc <- s.Serve(ctx, ln) }()
	go func() { errc <- s.ServeAdmin(ctx, aln) }()
	ts := &testServer{Server: s, addr: ln.Addr().String(), admin: "http://" + aln.Addr().String()}
	stopped := false
	ts.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		for range 2 {
			if err := <-errc; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
		s.Close()
	}
	t.Cleanup(ts.stop)
	return ts
}

func newMaster(t testing.TB, opts master.Options) *master.Master {
	t.Helper()
	m, err := master.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func dial(t testing.TB, addr string, opts masterclient.Options) *masterclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := masterclient.Dial(ctx, addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func items(tenant string, tier meta.Tier, size int64, ids ...uint64) []meta.Item {
	out := make([]meta.Item, len(ids))
	for i, id := range ids {
		k := block.Key{Tenant: tenant, ID: id}
		out[i] = meta.Item{Key: k, Tier: tier, Size: size, Sum: uint32(id * 7)}
	}
	return out
}

// httpGet fetches url and returns the status and body.
func httpGet(t testing.TB, url string) (int, string) {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// waitFor polls cond every few milliseconds until it holds or the deadline
// passes (condition-based waiting: no fixed sleeps).
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

func isUnavailable(err error) bool { return errors.Is(err, masterclient.ErrUnavailable) }
