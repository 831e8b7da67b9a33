package hitrate

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestWriteText(t *testing.T) {
	r := Result{Policy: "lru", Capacity: 10, Nodes: 2, Routing: Affinity, Requests: 3,
		TokenHitRatio: 0.25, HitTokens: 256, InputTokens: 1024, BlockHitRatio: 0.5, HitBlocks: 1, Blocks: 2, NodeRequests: []int{2, 1}}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"policy           lru\n",
		"capacity         10 blocks per node × 2 nodes (routing affinity)\n",
		"token hit ratio  25.00% (256 of 1024 tokens)\n",
		"block hit ratio  50.00% (1 of 2 blocks)\n",
		"node requests    [2 1]\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

func TestWriteCSV(t *testing.T) {
	var b bytes.Buffer
	rs := []Result{
		{Policy: "lru", Capacity: 10, Nodes: 1, Routing: RoundRobin, TokenHitRatio: 1.0 / 3, BlockHitRatio: 0.5},
		{Policy: "s3fifo+second-hit", Capacity: 20, Nodes: 1, Routing: RoundRobin},
	}
	if err := WriteCSV(&b, "conv,ersation", rs); err != nil {
		t.Fatal(err)
	}
	want := "trace,policy,capacity,nodes,routing,token_hit_ratio,block_hit_ratio\n" +
		"\"conv,ersation\",lru,10,1,rr,0.333333,0.500000\n" +
		"\"conv,ersation\",s3fifo+second-hit,20,1,rr,0.000000,0.000000\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	if err := WriteCSV(failWriter{}, "x", rs); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("write to a failing writer: %v", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
