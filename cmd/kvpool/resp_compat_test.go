package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/cluster"
)

// needTool returns the path of a tool a compatibility test drives, or
// skips the test saying why; under CI (which installs them, .ci/run) a
// missing tool fails the test instead.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is missing (Debian package %s): .ci/run installs it; CI must run this test", name, pkg)
	}
	t.Skipf("%s is not installed (Debian package %s; .ci/run installs it)", name, pkg)
	return ""
}

// respCluster starts a two-node cluster of real processes with the Redis
// front on and returns it.
func respCluster(ctx context.Context, t *testing.T, o cluster.Options) *cluster.Cluster {
	t.Helper()
	multiProcess(t)
	o.RESP = true
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	cl, _ := startCluster(ctx, t, o)
	if err := cl.WaitLive(ctx, o.Nodes); err != nil {
		t.Fatal(err)
	}
	return cl
}

// rawRESP is a raw RESP connection: commands out, replies back as bytes.
type rawRESP struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialRESP(t *testing.T, addr string) *rawRESP {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawRESP{t: t, nc: nc, r: bufio.NewReaderSize(nc, 1<<20)}
}

func respEncode(args ...[]byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n", len(a))
		b.Write(a)
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

// do sends a command and returns its reply's raw bytes (one reply: a
// line, or a bulk string with its data).
func (c *rawRESP) do(args ...[]byte) []byte {
	c.t.Helper()
	if _, err := c.nc.Write(respEncode(args...)); err != nil {
		c.t.Fatal(err)
	}
	return c.reply()
}

func (c *rawRESP) reply() []byte {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		c.t.Fatalf("read reply: %v", err)
	}
	if line[0] != '$' {
		return line
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(line[1:])))
	if err != nil || n < 0 {
		return line
	}
	data := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, data); err != nil {
		c.t.Fatalf("read %d-byte bulk: %v", n, err)
	}
	return append(line, data...)
}

func args(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, a := range s {
		out[i] = []byte(a)
	}
	return out
}

// TestRESPNativeConnectorBytes checks, on a raw socket across two nodes'
// Redis ports, the byte-exact replies LMCache's native RESP connector
// matches (+OK, :0/:1, $<len> and $-1), a 4 MiB binary value holding
// every byte value, and a pipeline answered in order.
func TestRESPNativeConnectorBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := respCluster(ctx, t, cluster.Options{})
	a, b := dialRESP(t, cl.Nodes[0].RESPAddr), dialRESP(t, cl.Nodes[1].RESPAddr)
	chunk := testPayload(7, 256<<10)
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte(i * 31)
	}
	for _, x := range []struct {
		c    *rawRESP
		cmd  [][]byte
		want []byte
	}{
		{a, [][]byte{[]byte("SET"), []byte("chunk@0"), chunk}, []byte("+OK\r\n")},
		{b, args("EXISTS", "chunk@0"), []byte(":1\r\n")},
		{b, args("EXISTS", "chunk@1"), []byte(":0\r\n")},
		{b, args("GET", "chunk@0"), append([]byte("$262144\r\n"), append(chunk, '\r', '\n')...)},
		{b, args("GET", "chunk@1"), []byte("$-1\r\n")},
		{a, [][]byte{[]byte("SET"), []byte("big"), big}, []byte("+OK\r\n")},
		{b, args("GET", "big"), append([]byte("$4194304\r\n"), append(big, '\r', '\n')...)},
		{b, args("DEL", "chunk@0"), []byte(":1\r\n")},
		{a, args("EXISTS", "chunk@0"), []byte(":0\r\n")},
		{a, args("GET", "chunk@0"), []byte("$-1\r\n")},
	} {
		if got := x.c.do(x.cmd...); !bytes.Equal(got, x.want) {
			t.Fatalf("%s %s: got %d bytes %.60q, want %d bytes %.60q", x.cmd[0], x.cmd[1], len(got), got, len(x.want), x.want)
		}
	}
	var pipe bytes.Buffer
	for i := range 16 {
		pipe.Write(respEncode(args("SET", fmt.Sprintf("p%d", i), strconv.Itoa(i))...))
	}
	for i := range 16 {
		pipe.Write(respEncode(args("GET", fmt.Sprintf("p%d", i))...))
	}
	a.nc.Write(pipe.Bytes())
	for i := range 16 {
		if got := string(a.reply()); got != "+OK\r\n" {
			t.Fatalf("pipelined SET %d: %q", i, got)
		}
	}
	for i := range 16 {
		v := strconv.Itoa(i)
		if got, want := string(a.reply()), fmt.Sprintf("$%d\r\n%s\r\n", len(v), v); got != want {
			t.Fatalf("pipelined GET %d: %q, want %q", i, got, want)
		}
	}
}

// TestRESPRedisCLI drives the front with redis-cli: its start-up COMMAND
// DOCS, and commands across two nodes.
func TestRESPRedisCLI(t *testing.T) {
	cli := needTool(t, "redis-cli", "redis-tools")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := respCluster(ctx, t, cluster.Options{})
	run := func(addr string, stdin []byte, a ...string) string {
		t.Helper()
		host, port, _ := net.SplitHostPort(addr)
		cmd := exec.CommandContext(ctx, cli, append([]string{"-h", host, "-p", port}, a...)...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("redis-cli %q: %v\n%s%s", a, err, out.String(), errb.String())
		}
		if errb.Len() > 0 {
			t.Fatalf("redis-cli %q wrote to stderr: %s", a, errb.String())
		}
		return strings.TrimRight(out.String(), "\n")
	}
	n0, n1 := cl.Nodes[0].RESPAddr, cl.Nodes[1].RESPAddr
	for _, x := range []struct {
		addr string
		cmd  []string
		want string
	}{
		{n0, []string{"PING"}, "PONG"},
		{n0, []string{"SET", "greeting", "hello"}, "OK"},
		{n1, []string{"GET", "greeting"}, "hello"},
		{n1, []string{"SET", "greeting", "bye", "NX"}, ""},
		{n1, []string{"SET", "greeting", "bye", "XX", "GET"}, "hello"},
		{n0, []string{"GET", "greeting"}, "bye"},
		{n0, []string{"EXPIRE", "greeting", "100"}, "1"},
		{n1, []string{"TTL", "greeting"}, "100"},
		{n1, []string{"PERSIST", "greeting"}, "1"},
		{n0, []string{"TTL", "greeting"}, "-1"},
		{n0, []string{"MSET", "a", "1", "b", "2"}, "OK"},
		{n1, []string{"MGET", "a", "b", "c"}, "1\n2"},
		{n1, []string{"EXISTS", "a", "b", "c"}, "2"},
		{n1, []string{"KVPOOL.PREFIX", "a", "b", "c", "greeting"}, "2"},
		{n0, []string{"STRLEN", "greeting"}, "3"},
		{n0, []string{"TYPE", "a"}, "string"},
		{n0, []string{"DBSIZE"}, "3"},
		{n1, []string{"DEL", "a", "c"}, "1"},
		{n0, []string{"EXISTS", "a"}, "0"},
		{n0, []string{"CONFIG", "GET", "appendonly"}, "appendonly\nno"},
		{n0, []string{"FLUSHDB"}, "OK"},
		{n1, []string{"DBSIZE"}, "0"},
	} {
		if got := run(x.addr, nil, x.cmd...); got != x.want {
			t.Errorf("redis-cli %q = %q, want %q", x.cmd, got, x.want)
		}
	}
	// The rest of the commands, whose replies vary (ids, TTLs counting
	// down, command tables) or that need one connection (a session on
	// stdin, one command per line).
	for _, x := range []struct {
		addr  string
		stdin string
		cmd   []string
		ok    func(string) bool
		want  string
	}{
		{n0, "", []string{"ECHO", "hi there"}, eq("hi there"), "hi there"},
		{n0, "", []string{"SELECT", "0"}, eq("OK"), "OK"},
		{n0, "", []string{"HELLO", "2"}, has("proto\n2\n"), "server, version, proto 2, …"},
		{n0, "", []string{"AUTH", "default", "anything"}, eq("OK"), "OK (an open node, as Redis without a password)"},
		{n0, "CLIENT SETINFO LIB-NAME redis-py\nCLIENT SETNAME me\nCLIENT GETNAME\nCLIENT ID\n", nil, func(s string) bool {
			id, ok := strings.CutPrefix(s, "OK\nOK\nme\n")
			_, err := strconv.Atoi(id)
			return ok && err == nil
		}, "OK, OK, me, <id>"},
		{n0, "", []string{"QUIT"}, eq("OK"), "OK"},
		{n0, "", []string{"COMMAND", "COUNT"}, func(s string) bool { n, err := strconv.Atoi(s); return err == nil && n >= 25 }, ">= 25 commands"},
		{n0, "", []string{"COMMAND", "INFO", "get"}, has("get\n2\n"), "get's arity 2"},
		{n0, "", []string{"COMMAND", "DOCS", "set"}, has("summary"), "set's docs"},
		{n0, "", []string{"SET", "t", "v", "EX", "100"}, eq("OK"), "OK"},
		{n1, "", []string{"PTTL", "t"}, between(90_000, 100_000), "a PTTL near 100000"},
		{n1, "", []string{"PEXPIRE", "t", "50000"}, eq("1"), "1"},
		{n0, "", []string{"SET", "t", "w", "KEEPTTL"}, eq("OK"), "OK"},
		{n1, "", []string{"TTL", "t"}, between(40, 50), "a TTL near 50 (kept)"},
		{n0, "", []string{"SET", "u", "x", "PX", "100000"}, eq("OK"), "OK"},
		{n1, "", []string{"UNLINK", "u", "nope"}, eq("1"), "1"},
		{n1, "", []string{"SCAN", "0", "MATCH", "t*", "COUNT", "100"}, eq("0\nt"), "cursor 0, key t"},
	} {
		var in []byte
		if x.stdin != "" {
			in = []byte(x.stdin)
		}
		if got := run(x.addr, in, x.cmd...); !x.ok(got) {
			t.Errorf("redis-cli %q (stdin %q) = %q, want %s", x.cmd, x.stdin, got, x.want)
		}
	}
	if got := run(n0, nil, "INFO"); !strings.Contains(got, "# kvpool") || !strings.Contains(got, "redis_version:") {
		t.Errorf("INFO lacks its sections:\n%s", got)
	}
	// A 4 MiB binary value through redis-cli -x (the value on stdin).
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte(i*13 + 1)
	}
	if got := run(n0, big, "-x", "SET", "big"); got != "OK" {
		t.Fatalf("redis-cli -x SET big: %q", got)
	}
	if got := run(n1, nil, "STRLEN", "big"); got != strconv.Itoa(len(big)) {
		t.Fatalf("STRLEN big through the other node = %q", got)
	}
	if got := dialRESP(t, n1).do(args("GET", "big")...); !bytes.Equal(got, append([]byte("$4194304\r\n"), append(big, '\r', '\n')...)) {
		t.Fatalf("GET big: %d bytes, not the value redis-cli stored", len(got))
	}
	// And back out through redis-cli, raw on a pipe (its last byte is
	// not a newline, which run trims).
	if got := run(n1, nil, "GET", "big"); got != string(big) {
		t.Fatalf("redis-cli GET big through the other node: %d bytes, not the %d stored", len(got), len(big))
	}
}

func eq(want string) func(string) bool { return func(s string) bool { return s == want } }

func has(part string) func(string) bool {
	return func(s string) bool { return strings.Contains(s, part) }
}

func between(lo, hi int) func(string) bool {
	return func(s string) bool { n, err := strconv.Atoi(s); return err == nil && lo <= n && n <= hi }
}

// TestRESPRedisBenchmark runs redis-benchmark against a node's Redis port:
// it completes with no error reply.
func TestRESPRedisBenchmark(t *testing.T) {
	bench := needTool(t, "redis-benchmark", "redis-tools")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := respCluster(ctx, t, cluster.Options{Nodes: 1})
	host, port, _ := net.SplitHostPort(cl.Nodes[0].RESPAddr)
	out, err := exec.CommandContext(ctx, bench, "-h", host, "-p", port, "-t", "ping,set,get,mset", "-q", "-n", "2000", "-c", "8").CombinedOutput()
	text := strings.ReplaceAll(string(out), "\r", "\n")
	if err != nil {
		t.Fatalf("redis-benchmark: %v\n%s", err, text)
	}
	if strings.Contains(text, "ERR") || strings.Contains(strings.ToLower(text), "error") {
		t.Fatalf("redis-benchmark met errors:\n%s", text)
	}
	for _, test := range []string{"PING_INLINE: ", "PING_MBULK: ", "SET: ", "GET: ", "MSET (10 keys): "} {
		if !strings.Contains(text, test) || !strings.Contains(text, "requests per second") {
			t.Errorf("redis-benchmark printed no %s result:\n%s", test, text)
		}
	}
}

// TestRESPLMCacheAndHiCache runs redis-py clients nobody here wrote:
// LMCache's classic connector sequence for 100 chunks across two nodes'
// Redis ports, then the HiCache backend's pytest suite against a node.
func TestRESPLMCacheAndHiCache(t *testing.T) {
	needTool(t, "/usr/bin/python3", "python3")
	if err := exec.Command("/usr/bin/python3", "-c", "import redis, pytest").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-py or pytest missing for /usr/bin/python3 (Debian python3-redis, python3-pytest): %v", err)
		}
		t.Skipf("redis-py or pytest missing for /usr/bin/python3 (Debian python3-redis, python3-pytest): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := respCluster(ctx, t, cluster.Options{})
	script := filepath.Join(t.TempDir(), "lmcache_classic.py")
	if err := os.WriteFile(script, []byte(lmcacheClassic), 0o644); err != nil {
		t.Fatal(err)
	}
	hostA, portA, _ := net.SplitHostPort(cl.Nodes[0].RESPAddr)
	_, portB, _ := net.SplitHostPort(cl.Nodes[1].RESPAddr)
	out, err := exec.CommandContext(ctx, "/usr/bin/python3", script, hostA, portA, portB).CombinedOutput()
	if err != nil {
		t.Fatalf("LMCache classic sequence: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ok 100 chunks") {
		t.Fatalf("LMCache classic sequence did not finish:\n%s", out)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	py := exec.CommandContext(ctx, "/usr/bin/python3", "-m", "pytest", "python/kvpool_hicache/tests", "-q", "-rs", "-p", "no:cacheprovider")
	py.Dir = root
	py.Env = append(os.Environ(), "KVPOOL_RESP_URL=redis://"+cl.Nodes[1].RESPAddr+"/0")
	out, err = py.CombinedOutput()
	if err != nil {
		t.Fatalf("HiCache backend tests against a node: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "SKIPPED") && strings.Contains(string(out), "PREFIX") {
		t.Fatalf("the KVPOOL.PREFIX test skipped against kvpool:\n%s", out)
	}
	t.Logf("pytest: %s", strings.TrimSpace(string(out)))
}

// lmcacheClassic is LMCache's classic redis:// connector sequence, as its
// source does it (payload key then metadata key, no separator; get reads
// the metadata then the payload and deletes the metadata of a payload
// that is gone), with redis-py, across two nodes.
const lmcacheClassic = `
import os, random, sys
import redis
host, pa, pb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
a = redis.Redis(host=host, port=pa)
b = redis.Redis(host=host, port=pb)
rnd = random.Random(16)
sizes = [28, 32 << 10, 1 << 20]
chunks = []
for i in range(100):
    key = "meta-llama/Llama-3.1-8B@2@%d@%016x@bfloat16" % (i % 2, rnd.getrandbits(64))
    payload = rnd.randbytes(sizes[i % 3])
    meta = rnd.randbytes(28)
    assert a.set(key + "kv_bytes", payload) is True
    assert a.set(key + "metadata", meta) is True
    chunks.append((key, payload, meta))
for key, payload, meta in chunks:
    if b.exists(key + "metadata") != 1:
        sys.exit("EXISTS %smetadata via node B: not found" % key)
    m = b.get(key + "metadata")
    p = b.get(key + "kv_bytes")
    if m != meta or p != payload:
        sys.exit("GET %s via node B: wrong bytes (metadata %s, payload %s)" % (key, m == meta, p == payload))
gone = chunks[::2]
for key, _, _ in gone:
    assert a.delete(key + "kv_bytes") == 1
for key, payload, meta in chunks:
    m = b.get(key + "metadata")
    p = b.get(key + "kv_bytes")
    if (key, payload, meta) in gone:
        if p is not None:
            sys.exit("deleted payload %s still readable" % key)
        b.delete(key + "metadata")
    elif p != payload:
        sys.exit("kept payload %s: wrong bytes" % key)
left = sum(a.exists(k + "metadata") for k, _, _ in chunks)
if left != 50:
    sys.exit("metadata keys left: %d, want 50" % left)
print("ok 100 chunks")
`
