package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/cluster"
)

// infoField returns an integer field of a node's INFO kvpool section.
func infoField(t *testing.T, c *rawRESP, field string) int64 {
	t.Helper()
	reply := string(c.do(args("INFO", "kvpool")...))
	for _, line := range strings.Split(reply, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO %s = %q: %v", field, v, err)
			}
			return n
		}
	}
	t.Fatalf("INFO kvpool has no %s:\n%s", field, reply)
	return 0
}

func bulk(v []byte) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(v), v) }

// TestRESPShortcutsAcrossFronts: the front's shortcuts (a GET of this
// node's own copy without asking the master, a SET over it in place,
// overlapping SETs of one key stored once) never let a front answer an
// old value after a newer one was acknowledged on any front, nor a
// deleted or expired key.
func TestRESPShortcutsAcrossFronts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := respCluster(ctx, t, cluster.Options{})
	a, b := dialRESP(t, cl.Nodes[0].RESPAddr), dialRESP(t, cl.Nodes[1].RESPAddr)
	expect := func(c *rawRESP, want string, cmd ...[]byte) {
		t.Helper()
		if got := string(c.do(cmd...)); got != want {
			t.Fatalf("%q: got %.80q, want %.80q", bytes.Join(cmd, []byte(" ")), got, want)
		}
	}
	v := func(tag byte, n int) []byte { return bytes.Repeat([]byte{tag}, n) }

	// A's own copy, read twice: the second read needs no master.
	expect(a, "+OK\r\n", []byte("SET"), []byte("k"), v('1', 4096))
	expect(a, bulk(v('1', 4096)), args("GET", "k")...)
	expect(a, bulk(v('1', 4096)), args("GET", "k")...)
	if n := infoField(t, a, "kvpool_reads_without_master"); n < 1 {
		t.Errorf("kvpool_reads_without_master = %d after reading A's own copy twice; want >= 1", n)
	}
	// Same size over A's only copy: in place; B reads it from A.
	expect(a, "+OK\r\n", []byte("SET"), []byte("k"), v('2', 4096))
	if n := infoField(t, a, "kvpool_sets_in_place"); n < 1 {
		t.Errorf("kvpool_sets_in_place = %d after a same-size SET over A's only copy; want >= 1", n)
	}
	expect(b, bulk(v('2', 4096)), args("GET", "k")...)
	expect(a, bulk(v('2', 4096)), args("GET", "k")...)
	// A SET on B moves the key to B and deletes A's copy first: A, which
	// trusted its copy a moment ago, must answer B's value.
	expect(b, "+OK\r\n", []byte("SET"), []byte("k"), v('3', 4096))
	expect(a, bulk(v('3', 4096)), args("GET", "k")...)
	expect(a, "+OK\r\n", []byte("SET"), []byte("k"), v('4', 100))
	expect(b, bulk(v('4', 100)), args("GET", "k")...)
	expect(a, bulk(v('4', 100)), args("GET", "k")...)

	// A DEL on B of A's trusted copy: gone on A at once.
	expect(a, "+OK\r\n", args("SET", "d", "x")...)
	expect(a, bulk([]byte("x")), args("GET", "d")...)
	expect(b, ":1\r\n", args("DEL", "d")...)
	expect(a, "$-1\r\n", args("GET", "d")...)

	// An expiry set on A's front applies to A's trusted copy.
	expect(a, "+OK\r\n", args("SET", "e", "y")...)
	expect(a, bulk([]byte("y")), args("GET", "e")...)
	expect(a, ":1\r\n", args("PEXPIRE", "e", "1")...)
	deadline := time.Now().Add(time.Minute)
	for string(a.do(args("GET", "e")...)) != "$-1\r\n" {
		if time.Now().After(deadline) {
			t.Fatal("GET e on A still answers a value a minute after PEXPIRE e 1")
		}
		time.Sleep(5 * time.Millisecond)
	}
	expect(b, "$-1\r\n", args("GET", "e")...)

	// Overlapping SETs of one key through one front: each is answered,
	// and afterwards every front reads the same value, one of them.
	const writers = 16
	var wg sync.WaitGroup
	written := make([]string, writers)
	errs := make([]string, writers)
	for i := range writers {
		c := dialRESP(t, cl.Nodes[0].RESPAddr)
		written[i] = bulk(v(byte('a'+i), 2048))
		wg.Go(func() {
			for range 20 {
				if got := string(c.do([]byte("SET"), []byte("hot"), v(byte('a'+i), 2048))); got != "+OK\r\n" {
					errs[i] = got
					return
				}
			}
		})
	}
	wg.Wait()
	for i, e := range errs {
		if e != "" {
			t.Fatalf("writer %d: SET answered %q", i, e)
		}
	}
	got := string(a.do(args("GET", "hot")...))
	if !slices.Contains(written, got) {
		t.Fatalf("GET hot on A = %.40q…; not a value any writer wrote", got)
	}
	if other := string(b.do(args("GET", "hot")...)); other != got {
		t.Fatalf("GET hot on B = %.40q…, on A %.40q…; want the same value", other, got)
	}
	t.Logf("coalesced SETs on A: %d of %d", infoField(t, a, "kvpool_sets_coalesced"), writers*20)
}
