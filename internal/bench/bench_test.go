package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/internal/payload"
	"github.com/kvpool/kvpool/trace/tracetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTarget hands out workers that count their calls and fail on request.
type fakeTarget struct {
	workers  int
	failAt   int64 // the request (1-based, over all workers) that fails; 0 never
	calls    atomic.Int64
	closed   bool
	startErr error
	block    chan struct{} // when set, the first Do waits for it
}

type fakeWorker struct{ t *fakeTarget }

var errFake = errors.New("fake failure")

func (w fakeWorker) Do(ctx context.Context) (Op, error) {
	n := w.t.calls.Add(1)
	if n == 1 && w.t.block != nil {
		select {
		case <-w.t.block:
		case <-ctx.Done():
			return Op{}, ctx.Err()
		}
	}
	if n == w.t.failAt {
		return Op{}, errFake
	}
	return Op{Ops: 2, Bytes: 100}, nil
}

func (t *fakeTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	if t.startErr != nil {
		return nil, t.startErr
	}
	ws := make([]Worker, t.workers)
	for i := range ws {
		ws[i] = fakeWorker{t}
	}
	return ws, nil
}

func (t *fakeTarget) Close() error { t.closed = true; return nil }

func TestRunTarget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
		count   int64
		failAt  int64
		start   error
		wantErr error
	}{
		{name: "one worker", workers: 1, count: 10},
		{name: "many workers", workers: 7, count: 1000},
		{name: "worker fails", workers: 3, count: 100, failAt: 50, wantErr: errFake},
		{name: "start fails", workers: 3, count: 100, start: errFake, wantErr: errFake},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := &fakeTarget{workers: tc.workers, failAt: tc.failAt, startErr: tc.start}
			res, err := RunTarget(context.Background(), Spec{Target: "fake", Count: tc.count, Conns: tc.workers}, ft)
			if !ft.closed {
				t.Error("target not closed")
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != tc.count || ft.calls.Load() != tc.count {
				t.Errorf("requests %d, calls %d, want %d", res.Requests, ft.calls.Load(), tc.count)
			}
			if res.Ops != 2*tc.count || res.Bytes != 100*tc.count {
				t.Errorf("ops %d bytes %d, want %d and %d", res.Ops, res.Bytes, 2*tc.count, 100*tc.count)
			}
			if !(res.P50Micros <= res.P99Micros && res.P99Micros <= res.MaxMicros) {
				t.Errorf("latencies not ordered: p50 %v p99 %v max %v", res.P50Micros, res.P99Micros, res.MaxMicros)
			}
			if res.Seconds <= 0 || res.OpsPerSec <= 0 {
				t.Errorf("seconds %v ops/s %v, want > 0", res.Seconds, res.OpsPerSec)
			}
		})
	}
}

func TestRunTargetCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := RunTarget(ctx, Spec{Target: "fake", Duration: time.Hour}, &fakeTarget{workers: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// syncWriter signals its first write.
type syncWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	once  sync.Once
	wrote chan struct{}
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.once.Do(func() { close(w.wrote) })
	return w.buf.Write(p)
}

// TestProgress: a run that lasts past the first progress tick writes a
// progress line (the fake's first request waits for that line).
func TestProgress(t *testing.T) {
	pw := &syncWriter{wrote: make(chan struct{})}
	ft := &fakeTarget{workers: 1, block: pw.wrote}
	_, err := RunTarget(context.Background(), Spec{Target: "fake", Count: 3, Progress: pw, ProgressEvery: time.Millisecond}, ft)
	if err != nil {
		t.Fatal(err)
	}
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if !strings.Contains(pw.buf.String(), "bench fake:") {
		t.Fatalf("progress output %q, want a line naming the target", pw.buf.String())
	}
}

func TestPercentile(t *testing.T) {
	d := make([]time.Duration, 100)
	for i := range d {
		d[i] = time.Duration(i + 1)
	}
	for _, tc := range []struct{ p, want int }{{50, 50}, {99, 99}, {100, 100}, {1, 1}} {
		if got := percentile(d, tc.p); got != time.Duration(tc.want) {
			t.Errorf("p%d = %d, want %d", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile of nothing = %d", got)
	}
}

func TestSpecValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spec  Spec
		field string
	}{
		{"ok", Spec{Target: TargetNode}, ""},
		{"ok redis", Spec{Target: TargetRedis, Addr: "x:1", Depth: 16, WriteFraction: 0.5}, ""},
		{"no target", Spec{}, "Target"},
		{"bad target", Spec{Target: "nope"}, "Target"},
		{"bad tier", Spec{Target: TargetNode, Tier: "tape"}, "Tier"},
		{"negative block", Spec{Target: TargetRAM, BlockSize: -1}, "BlockSize"},
		{"huge block", Spec{Target: TargetRAM, BlockSize: 1 << 30}, "BlockSize"},
		{"block over 512 MiB", Spec{Target: TargetNode, BlockSize: MaxBlockSize + 1}, "BlockSize"},
		{"ok 512 MiB block", Spec{Target: TargetTCP, BlockSize: MaxBlockSize}, ""},
		{"ok named node", Spec{Target: TargetNode, Named: true}, ""},
		{"named on tcp", Spec{Target: TargetTCP, Named: true}, "Named"},
		{"named on master", Spec{Target: TargetMaster, Named: true}, "Named"},
		{"negative conns", Spec{Target: TargetRAM, Conns: -1}, "Conns"},
		{"negative batch", Spec{Target: TargetMaster, Batch: -1}, "Batch"},
		{"ok master-index", Spec{Target: TargetMasterIndex, Keys: 1000}, ""},
		{"negative keys", Spec{Target: TargetMasterIndex, Keys: -1}, "Keys"},
		{"too many keys", Spec{Target: TargetMasterIndex, Keys: MaxIndexKeys + 1}, "Keys"},
		{"keys on master", Spec{Target: TargetMaster, Keys: 10}, "Keys"},
		{"depth on node", Spec{Target: TargetNode, Depth: 4}, "Depth"},
		{"write fraction > 1", Spec{Target: TargetRAM, WriteFraction: 1.5}, "WriteFraction"},
		{"write fraction NaN", Spec{Target: TargetRAM, WriteFraction: nan()}, "WriteFraction"},
		{"writes on tcp", Spec{Target: TargetTCP, WriteFraction: 0.5}, "WriteFraction"},
		{"node batch with writes", Spec{Target: TargetNode, Batch: 32, WriteFraction: 0.5}, "Batch"},
		{"depth on tcp-set", Spec{Target: TargetTCPSet, Depth: 2}, "Depth"},
		{"depth on disk-node", Spec{Target: TargetDiskNode, Depth: 2}, "Depth"},
		{"depth on disk-tcp", Spec{Target: TargetDiskTCP, Depth: 2}, "Depth"},
		{"negative duration", Spec{Target: TargetRAM, Duration: -time.Second}, "Duration"},
		{"negative count", Spec{Target: TargetRAM, Count: -1}, "Count"},
		{"data under a block", Spec{Target: TargetRAM, DataBytes: 10}, "DataBytes"},
		{"redis without addr", Spec{Target: TargetRedis}, "Addr"},
		{"ok cluster", Spec{Target: TargetCluster, Nodes: 5, Batch: 16}, ""},
		{"negative nodes", Spec{Target: TargetCluster, Nodes: -1}, "Nodes"},
		{"too many nodes", Spec{Target: TargetCluster, Nodes: clusterMaxNodes + 1}, "Nodes"},
		{"depth on cluster", Spec{Target: TargetCluster, Depth: 2}, "Depth"},
		{"writes on cluster", Spec{Target: TargetCluster, WriteFraction: 0.1}, "WriteFraction"},
		{"cluster data under a batch", Spec{Target: TargetCluster, Batch: 8, BlockSize: 1024, DataBytes: 7 * 1024}, "DataBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if option.Field(err) != tc.field {
				t.Fatalf("Validate = %v, want an error naming %s", err, tc.field)
			}
			if _, rerr := Run(context.Background(), tc.spec); rerr == nil {
				t.Fatal("Run accepted an invalid spec")
			}
		})
	}
}

func nan() float64 { z := 0.0; return z / z }

func TestRESPEncode(t *testing.T) {
	if got, want := string(AppendGet(nil, "k1")), "*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n"; got != want {
		t.Errorf("GET = %q, want %q", got, want)
	}
	if got, want := string(AppendSetHeader([]byte("x"), "key", 5)), "x*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\n"; got != want {
		t.Errorf("SET = %q, want %q", got, want)
	}
}

func TestReadReply(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Reply
		wantErr error
		redis   bool
	}{
		{in: "+OK\r\n", want: Reply{Kind: '+', Str: "OK"}},
		{in: ":42\r\n", want: Reply{Kind: ':', Int: 42}},
		{in: "$5\r\nhello\r\n", want: Reply{Kind: '$', Int: 5, Bulk: []byte("hello")}},
		{in: "$0\r\n\r\n", want: Reply{Kind: '$', Int: 0, Bulk: []byte{}}},
		{in: "$-1\r\n", want: Reply{Kind: '$', Int: -1}},
		{in: "-ERR wrong\r\n", redis: true},
		{in: "*1\r\n", wantErr: ErrRESP},
		{in: "\r\n", wantErr: ErrRESP},
		{in: "+OK\n", wantErr: ErrRESP},
		{in: ":x\r\n", wantErr: ErrRESP},
		{in: "$-2\r\n", wantErr: ErrRESP},
		{in: "$99999999999\r\n", wantErr: ErrRESP},
		{in: "$5\r\nhelloXY", wantErr: ErrRESP},
		{in: "$5\r\nhel", wantErr: io.ErrUnexpectedEOF},
		{in: "+OK", wantErr: io.ErrUnexpectedEOF},
		{in: "", wantErr: io.EOF},
		{in: "+" + strings.Repeat("a", 100) + "\r\n", wantErr: ErrRESP}, // longer than the reader's buffer
	} {
		t.Run(strconv.Quote(tc.in), func(t *testing.T) {
			r := bufio.NewReaderSize(strings.NewReader(tc.in), 16)
			got, err := ReadReply(r, make([]byte, 0, 8))
			var re RedisError
			switch {
			case tc.redis:
				if !errors.As(err, &re) {
					t.Fatalf("err = %v, want a RedisError", err)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case got.Kind != tc.want.Kind || got.Str != tc.want.Str || got.Int != tc.want.Int || !bytes.Equal(got.Bulk, tc.want.Bulk) || (got.Bulk == nil) != (tc.want.Bulk == nil):
				t.Fatalf("reply %+v, want %+v", got, tc.want)
			}
		})
	}
}

// fakeRedis serves GET and SET from a map over RESP, parsing commands
// with the same reader (arrays of bulk strings).
func fakeRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		data = map[string][]byte{}
		wg   sync.WaitGroup
		cs   []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			cs = append(cs, c)
			mu.Unlock()
			wg.Go(func() {
				r, w := bufio.NewReader(c), bufio.NewWriter(c)
				for {
					line, err := readLine(r)
					if err != nil || len(line) < 2 || line[0] != '*' {
						return
					}
					n, _ := strconv.Atoi(string(line[1:]))
					args := make([][]byte, n)
					for i := range args {
						rep, err := ReadReply(r, nil)
						if err != nil {
							return
						}
						args[i] = rep.Bulk
					}
					mu.Lock()
					switch string(args[0]) {
					case "SET":
						data[string(args[1])] = args[2]
						w.WriteString("+OK\r\n")
					case "GET":
						v, ok := data[string(args[1])]
						if !ok {
							w.WriteString("$-1\r\n")
						} else {
							w.WriteString("$" + strconv.Itoa(len(v)) + "\r\n")
							w.Write(v)
							w.WriteString("\r\n")
						}
					default:
						w.WriteString("-ERR unknown command\r\n")
					}
					mu.Unlock()
					if r.Buffered() == 0 {
						if w.Flush() != nil {
							return
						}
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range cs {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestTargetsSmoke runs every target with tiny sizes and counts and checks
// what it reports (never its speed).
func TestTargetsSmoke(t *testing.T) {
	const size = 16 << 10 // a multiple of 4096, as O_DIRECT needs
	redis := fakeRedis(t)
	trace, err := tracetest.Find("conversation_trace.jsonl")
	if err != nil {
		t.Logf("the sim target generates its trace: %v", err)
		trace = ""
	}
	for _, tc := range []struct {
		spec      Spec
		bytesPer  int64 // payload bytes per op (0: none)
		opsPerReq int64 // 0: unchecked (sim)
	}{
		{Spec{Target: TargetRAM}, size, 1},
		{Spec{Target: TargetRAM, WriteFraction: 0.5}, size, 1},
		{Spec{Target: TargetSSD, DataBytes: 32 * size}, size, 1},
		{Spec{Target: TargetSSD, DataBytes: 32 * size, WriteFraction: 0.5, BufferedIO: true}, size, 1},
		{Spec{Target: TargetNode}, size, 1},
		{Spec{Target: TargetNode, WriteFraction: 0.3}, size, 1},
		{Spec{Target: TargetNode, Tier: TierSSD, DataBytes: 32 * size}, size, 1},
		{Spec{Target: TargetMaster, Batch: 8}, 0, 8},
		{Spec{Target: TargetCluster, Batch: 4, Nodes: 2, DataBytes: 12 * size}, size, 4},
		{Spec{Target: TargetSim, Conns: 1, TracePath: trace}, 0, 0},
		{Spec{Target: TargetNode, Batch: 4}, size, 4},
		{Spec{Target: TargetNode, Batch: 3, Named: true}, size, 3},
		{Spec{Target: TargetNode, Batch: 4, Tier: TierSSD, DataBytes: 32 * size}, size, 4},
		{Spec{Target: TargetTCP}, size, 1},
		{Spec{Target: TargetTCPSet}, size, 1},
		{Spec{Target: TargetTCPSet, BlockSize: 1000}, 1000, 1},
		{Spec{Target: TargetDisk, DataBytes: 8 * size}, size, 1},
		{Spec{Target: TargetDiskNode, DataBytes: 8 * size}, size, 1},
		{Spec{Target: TargetDiskNode, BlockSize: 1000, DataBytes: 8 * size}, 1000, 1},
		{Spec{Target: TargetDisk, DataBytes: 8 * size, BufferedIO: true}, size, 1},
		{Spec{Target: TargetDiskTCP, DataBytes: 8 * size}, size, 1},
		{Spec{Target: TargetDiskTCP, BlockSize: 1000, DataBytes: 8 * size}, 1000, 1},
		{Spec{Target: TargetRedis, Addr: redis, Depth: 4}, size, 4},
		{Spec{Target: TargetRedis, Addr: redis, Depth: 3, WriteFraction: 0.5}, size, 3},
		{Spec{Target: TargetRAM, Named: true, WriteFraction: 0.5}, size, 1},
		{Spec{Target: TargetSSD, Named: true, DataBytes: 32 * size, WriteFraction: 0.5}, size, 1},
		{Spec{Target: TargetNode, Named: true, WriteFraction: 0.3}, size, 1},
		{Spec{Target: TargetNode, Named: true, Tier: TierSSD, DataBytes: 32 * size}, size, 1},
		{Spec{Target: TargetCluster, Named: true, Batch: 4, Nodes: 2, DataBytes: 12 * size}, size, 4},
		{Spec{Target: TargetRedis, Named: true, Addr: redis, Depth: 2}, size, 2},
		// Blocks that are not a whole number of RAM chunks: the tiers are
		// sized in what the objects take (a 1000-byte block takes a 4 KiB
		// chunk), not in block sizes.
		{Spec{Target: TargetRAM, BlockSize: 1000}, 1000, 1},
		{Spec{Target: TargetNode, BlockSize: 1000}, 1000, 1},
		{Spec{Target: TargetNode, BlockSize: 1000, Tier: TierSSD, BufferedIO: true}, 1000, 1},
		{Spec{Target: TargetCluster, BlockSize: 1000, Batch: 4, Nodes: 2}, 1000, 4},
		{Spec{Target: TargetClusterTCP, Batch: 4, Nodes: 2, DataBytes: 12 * size}, size, 4},
		{Spec{Target: TargetClusterTCP, BlockSize: 1000, Batch: 5, Nodes: 3}, 1000, 5},
	} {
		spec := tc.spec
		if spec.BlockSize == 0 {
			spec.BlockSize = size
		}
		spec.Count = 20
		if spec.Target == TargetSim {
			spec.Count = 1
		}
		if spec.Conns == 0 {
			spec.Conns = 2
		}
		name := spec.Target + "/" + spec.Tier + "/" + strconv.FormatFloat(spec.WriteFraction, 'f', -1, 64) + "/" + SizeName(spec.BlockSize)
		if spec.Named {
			name += "/named"
		}
		t.Run(name, func(t *testing.T) {
			spec.Dir = t.TempDir()
			res, err := Run(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != spec.Count {
				t.Errorf("requests %d, want %d", res.Requests, spec.Count)
			}
			if tc.opsPerReq > 0 && res.Ops != spec.Count*tc.opsPerReq {
				t.Errorf("ops %d, want %d", res.Ops, spec.Count*tc.opsPerReq)
			}
			if res.Ops <= 0 {
				t.Errorf("ops %d, want > 0", res.Ops)
			}
			if res.Bytes != res.Ops*tc.bytesPer {
				t.Errorf("bytes %d, want %d per op × %d ops", res.Bytes, tc.bytesPer, res.Ops)
			}
			if spec.Target == TargetNode && res.RAMTierBytes <= 0 {
				t.Errorf("node run reports RAM tier %d bytes", res.RAMTierBytes)
			}
			if strings.HasSuffix(res.Name, "-named") != spec.Named {
				t.Errorf("result %q for Named %v", res.Name, spec.Named)
			}
			var table bytes.Buffer
			if err := WriteTable(&table, []Result{res}); err != nil || !strings.Contains(table.String(), res.Name) {
				t.Errorf("table %q (%v) does not name %s", table.String(), err, res.Name)
			}
			entries, err := os.ReadDir(spec.Dir)
			if err != nil || len(entries) != 0 {
				t.Errorf("work directory left %d entries (%v)", len(entries), err)
			}
		})
	}
}

func TestRedisMissingKey(t *testing.T) {
	// A GET of a key the server does not hold is an error, not a zero-byte hit.
	addr := fakeRedis(t)
	tgt := &redisTarget{}
	spec := Spec{Target: TargetRedis, Addr: addr, BlockSize: 4096, Conns: 1, Depth: 1}.withDefaults()
	ws, err := tgt.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	w := ws[0].(*redisWorker)
	w.mix.n = 1000 // ids beyond the stored working set
	var failed bool
	for range 50 {
		if _, err := w.Do(context.Background()); err != nil {
			failed = errors.Is(err, errShort)
			break
		}
	}
	if !failed {
		t.Fatal("GETs of absent keys did not fail with errShort")
	}
}

func TestCompare(t *testing.T) {
	cs, err := Compare(context.Background(), CompareOptions{
		BlockSizes: []int{16 << 10}, Conns: 2, Duration: 50 * time.Millisecond,
		Against: []string{VsTCP, VsRedis}, RedisSkipReason: "not installed", Dir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 {
		t.Fatalf("%d comparisons, want 3", len(cs))
	}
	one, set, rd := cs[0], cs[1], cs[2]
	if one.Against != VsTCP || one.Reference != RefTCPOneBuffer || one.Kvpool.Name != "node-ram" || one.Other.Name != TargetTCP || one.Goal != 0 || one.Met {
		t.Errorf("tcp (one buffer) comparison %+v, want no goal", one)
	}
	// 16 KiB is not one of GoalSizes: the fair reference is there, without a goal.
	if set.Against != VsTCP || set.Reference != RefTCPWorkingSet || set.Other.Name != TargetTCPSet || set.Goal != 0 || set.Met {
		t.Errorf("tcp (working set) comparison %+v", set)
	}
	for _, c := range []Comparison{one, set} {
		if c.Ratio <= 0 {
			t.Errorf("%s: ratio %v", c.Reference, c.Ratio)
		}
	}
	if rd.Skipped != "not installed" || rd.Met {
		t.Errorf("redis comparison %+v, want skipped", rd)
	}
	var out bytes.Buffer
	if err := WriteComparisons(&out, cs); err != nil || !strings.Contains(out.String(), "skipped: not installed") {
		t.Errorf("table %q (%v)", out.String(), err)
	}
	if _, err := Compare(context.Background(), CompareOptions{Against: []string{"nfs"}}); option.Field(err) != "Against" {
		t.Errorf("Compare with a bad point: %v", err)
	}
	if _, err := Compare(context.Background(), CompareOptions{BlockSizes: []int{MaxBlockSize + 1}}); option.Field(err) != "BlockSizes" {
		t.Errorf("Compare with a block over 512 MiB: %v", err)
	}
}

// TestCompareNamed: with Named the node reads named objects (its row says
// so) and the comparison point is the same raw TCP.
func TestCompareNamed(t *testing.T) {
	cs, err := Compare(context.Background(), CompareOptions{
		BlockSizes: []int{16 << 10}, Conns: 2, Duration: 50 * time.Millisecond,
		Against: []string{VsTCP}, Named: true, Dir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Kvpool.Name != "node-ram-named" || !cs[0].Kvpool.Spec.Named || cs[0].Other.Name != TargetTCP || cs[0].Other.Spec.Named || cs[1].Other.Name != TargetTCPSet {
		t.Fatalf("comparisons %+v, want node-ram-named against tcp", cs)
	}
	if cs[0].Kvpool.Ops <= 0 || cs[0].Ratio <= 0 {
		t.Errorf("named run: %d ops, ratio %v", cs[0].Kvpool.Ops, cs[0].Ratio)
	}
}

// TestSizing: the targets' tiers are sized in what an object takes (name
// and payload in whole RAM chunks) and take objects up to the block size.
func TestSizing(t *testing.T) {
	for _, tc := range []struct {
		spec      Spec
		footprint int64
		maxObject int
	}{
		{Spec{BlockSize: 32 << 10}, 32 << 10, 64 << 20},
		{Spec{BlockSize: 32 << 10, Named: true}, 36 << 10, 64 << 20},
		{Spec{BlockSize: 1000}, 4 << 10, 64 << 20},
		{Spec{BlockSize: 1}, 4 << 10, 64 << 20},
		{Spec{BlockSize: 4 << 20}, 4 << 20, 64 << 20},
		{Spec{BlockSize: 100 << 20}, 100 << 20, 100 << 20},
	} {
		if got := ramFootprint(tc.spec); got != tc.footprint {
			t.Errorf("ramFootprint(%d bytes, named %v) = %d, want %d", tc.spec.BlockSize, tc.spec.Named, got, tc.footprint)
		}
		if got := maxObject(tc.spec); got != tc.maxObject {
			t.Errorf("maxObject(%d bytes) = %d, want %d", tc.spec.BlockSize, got, tc.maxObject)
		}
	}
	if objectNameLen > 64 {
		t.Errorf("names of %d bytes; the SSD sizing (ssd.SlotSize) counts up to 64", objectNameLen)
	}
	if a, b := objectName(1), objectName(2); a == b || len(a) != objectNameLen || !strings.HasSuffix(a, "@bfloat16kv_bytes") {
		t.Errorf("names %q, %q", a, b)
	}
}

func TestStartRedisMissing(t *testing.T) {
	_, err := StartRedis(context.Background(), "kvpool-no-such-redis-server")
	if err == nil || !strings.Contains(err.Error(), "kvpool-no-such-redis-server") {
		t.Fatalf("StartRedis of a missing binary: %v", err)
	}
}

func TestSizeName(t *testing.T) {
	for n, want := range map[int]string{256 << 10: "256KiB", 1 << 20: "1MiB", 1000: "1000B", 1536: "1536B"} {
		if got := SizeName(n); got != want {
			t.Errorf("SizeName(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestClusterDefaults(t *testing.T) {
	s := Spec{Target: TargetCluster, BlockSize: 1024, Batch: 100}.withDefaults()
	if s.Nodes != DefaultClusterNodes || s.Depth != 1 {
		t.Errorf("nodes %d depth %d, want %d and 1", s.Nodes, s.Depth, DefaultClusterNodes)
	}
	if s.blocks() != 100 {
		t.Errorf("default data set %d blocks for batches of 100, want 100", s.blocks())
	}
	if d := (Spec{Target: TargetCluster}).withDefaults(); d.Batch != DefaultClusterBatch || d.blocks() != DefaultWorkingBlocks {
		t.Errorf("batch %d, %d blocks; want %d and %d", d.Batch, d.blocks(), DefaultClusterBatch, DefaultWorkingBlocks)
	}
}

// TestClusterTCPTarget: the raw reference of the cluster target answers a
// run of blocks with the right bytes from the server each block is
// striped on, and CompareCluster refuses another target.
func TestClusterTCPTarget(t *testing.T) {
	const size, blocks, nodes, batch = 1000, 30, 3, 5
	tgt := &clusterTCPTarget{}
	spec := Spec{Target: TargetClusterTCP, BlockSize: size, Conns: 2, Batch: batch, Nodes: nodes, DataBytes: blocks * size}.withDefaults()
	ws, err := tgt.Start(context.Background(), spec)
	defer tgt.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != spec.Conns {
		t.Fatalf("%d workers, want %d", len(ws), spec.Conns)
	}
	w := ws[1].(*clusterTCPWorker)
	for range 20 {
		op, err := w.Do(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if op.Ops != batch || op.Bytes != batch*size {
			t.Fatalf("op %+v, want %d blocks of %d bytes", op, batch, size)
		}
		n := 0
		for j, ids := range w.ids {
			for k, id := range ids {
				if id%nodes != uint64(j) {
					t.Fatalf("block %d asked of server %d, want server %d", id, j, id%nodes)
				}
				if got, want := w.bufs[j][k*size:(k+1)*size], payload.New(size, benchTenant, id); !bytes.Equal(got, want) {
					t.Fatalf("server %d answered block %d with other bytes", j, id)
				}
				n++
			}
		}
		if n != batch {
			t.Fatalf("%d blocks asked for, want %d", n, batch)
		}
	}
	if _, err := CompareCluster(context.Background(), Spec{Target: TargetNode}); err == nil || !strings.Contains(err.Error(), "target: node") {
		t.Errorf("CompareCluster of the node target: %v, want an error naming the target", err)
	}
}

// TestClusterTarget starts the cluster target directly: every node holds
// part of the data set, a worker's Get loads a whole run, and a run past
// the stored blocks is an error, not a short success.
func TestClusterTarget(t *testing.T) {
	const size, blocks, nodes, batch = 4096, 30, 3, 5
	tgt := &clusterTarget{}
	spec := Spec{Target: TargetCluster, BlockSize: size, Conns: 2, Batch: batch, Nodes: nodes, DataBytes: blocks * size}.withDefaults()
	ws, err := tgt.Start(context.Background(), spec)
	if err != nil {
		tgt.Close()
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			tgt.Close()
		}
	}()
	if len(ws) != spec.Conns {
		t.Fatalf("%d workers, want %d", len(ws), spec.Conns)
	}
	total := 0
	for id, n := range tgt.perNode {
		if n < blocks/nodes-1 {
			t.Errorf("node %s holds %d of %d blocks, want an even share of %d nodes", id, n, blocks, nodes)
		}
		total += n
	}
	if len(tgt.perNode) != nodes || total != blocks {
		t.Errorf("blocks spread %v, want %d blocks over %d nodes", tgt.perNode, blocks, nodes)
	}
	for range 10 {
		op, err := ws[0].Do(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if op.Ops != batch || op.Bytes != batch*size {
			t.Fatalf("op %+v, want %d blocks of %d bytes", op, batch, size)
		}
	}
	w := ws[1].(*clusterWorker)
	w.mix.n = 10 * blocks // runs that start past the stored blocks
	var failed bool
	for range 50 {
		if _, err := w.Do(context.Background()); err != nil {
			failed = strings.Contains(err.Error(), "missing")
			break
		}
	}
	if !failed {
		t.Fatal("Gets of blocks never stored did not fail naming the missing block")
	}
	var res Result
	res.Spec = spec
	tgt.Annotate(&res)
	if len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "bench-node-0") {
		t.Errorf("notes %q do not describe the nodes", res.Notes)
	}
	closed = true
	if err := tgt.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// TestMasterIndexTarget builds a small index and looks it up: every
// lookup finds its whole batch (the worker fails otherwise) and the index
// figures are filled in.
func TestMasterIndexTarget(t *testing.T) {
	res, err := Run(context.Background(), Spec{Target: TargetMasterIndex, Keys: 20000, Count: 200, Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	x := res.Index
	switch {
	case x == nil:
		t.Fatal("no index figures")
	case x.Keys != 20000 || res.Ops != 200*DefaultMasterBatch:
		t.Errorf("keys %d, ops %d; want 20000 keys, %d ops", x.Keys, res.Ops, 200*DefaultMasterBatch)
	case x.BuildSeconds <= 0 || x.GCCycles < 2:
		// Not BytesPerKey: it is the whole process's heap, which the
		// other tests running beside this one move either way.
		t.Errorf("figures %+v: want a build time and the two forced GC cycles", *x)
	}
	var b strings.Builder
	if err := WriteTable(&b, []Result{res}); err != nil || !strings.Contains(b.String(), "bytes/key") {
		t.Errorf("table %q (err %v) does not report bytes/key", b.String(), err)
	}
}
