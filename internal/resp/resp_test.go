package resp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// chunkings are the ways a test's input reaches the Reader: every result
// must be the same whatever the chunks.
var chunkings = []struct {
	name string
	wrap func(io.Reader) io.Reader
}{
	{"whole", func(r io.Reader) io.Reader { return r }},
	{"one_byte", iotest.OneByteReader},
	{"half", iotest.HalfReader},
	{"data_err", iotest.DataErrReader},
}

// readAll reads commands until an error, returning copies of them and the
// error.
func readAll(t *testing.T, rd *Reader) ([][]string, error) {
	t.Helper()
	var cmds [][]string
	for {
		args, err := rd.ReadCommand()
		if err != nil {
			return cmds, err
		}
		if len(args) == 0 {
			t.Fatal("ReadCommand returned no arguments and no error")
		}
		cmd := make([]string, len(args))
		for i, a := range args {
			cmd[i] = string(a)
		}
		cmds = append(cmds, cmd)
	}
}

func cmds(c ...[]string) [][]string { return c }
func cmd(args ...string) []string   { return args }

// multibulk encodes args as a client does.
func multibulk(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

func equalCmds(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}

func TestReadCommand(t *testing.T) {
	binary := "a\r\n\x00\xff$*\r\n"
	tests := []struct {
		name string
		in   string
		want [][]string
	}{
		{"multibulk", "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", cmds(cmd("GET", "k"))},
		{"multibulk_empty_arg", "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", cmds(cmd("ECHO", ""))},
		{"binary_bulk_with_crlf", multibulk("SET", "k", binary), cmds(cmd("SET", "k", binary))},
		{"trailer_bytes_not_checked", "*1\r\n$3\r\nfooXY*1\r\n$1\r\na\r\n", cmds(cmd("foo"), cmd("a"))},
		{"header_lf_not_checked", "*1\rX$3\rYfoo\r\n", cmds(cmd("foo"))},
		{"max_args_and_bulk", "*1048576\r\n" + strings.Repeat("$0\r\n\r\n", 1<<20), cmds(make([]string, 1<<20))},
		{"inline", "GET k\r\n", cmds(cmd("GET", "k"))},
		{"inline_lf_only", "GET k\nPING\n", cmds(cmd("GET", "k"), cmd("PING"))},
		{"inline_extra_cr_is_blank", "GET k\r\r\n", cmds(cmd("GET", "k"))},
		{"inline_blanks", " \t SET\t k  v \r\n", cmds(cmd("SET", "k", "v"))},
		{"inline_vt_ff_inside_word", "\v\fa\vb\fc d\r\n", cmds(cmd("a\vb\fc", "d"))},
		{"inline_dollar_is_inline", "$3\r\n", cmds(cmd("$3"))},
		{"inline_double_quotes", `SET "a key" "x\x41\x4a\xfF\n\r\t\b\a\"\\\q"` + "\r\n", cmds(cmd("SET", "a key", "xAJ\xff\n\r\t\b\a\"\\q"))},
		{"inline_short_hex_is_x", `ECHO "\x4" "\xg0"` + "\r\n", cmds(cmd("ECHO", "x4", "xg0"))},
		{"inline_hex_nul", `ECHO "\x00"` + "\r\n", cmds(cmd("ECHO", "\x00"))},
		{"inline_single_quotes", `SET k 'it\'s "x" \n'` + "\r\n", cmds(cmd("SET", "k", `it's "x" \n`))},
		{"inline_quote_inside_word", `SET k ab"c d"  e'f g'` + "\r\n", cmds(cmd("SET", "k", "abc d", "ef g"))},
		{"inline_quote_then_blank", "ECHO \"a\"\t\"b\"\v'c'\r\n", cmds(cmd("ECHO", "a", "b", "c"))},
		{"inline_empty_quoted_kept", `SET k ""` + "\r\n", cmds(cmd("SET", "k", ""))},
		{"inline_64KiB_line", "ECHO " + strings.Repeat("a", 64<<10-6) + "\n", cmds(cmd("ECHO", strings.Repeat("a", 64<<10-6)))},
		{"empty_commands_skipped", "*0\r\n*-1\r\n*-5\r\n\r\n\n   \r\n\t\r\nPING\r\n*0\r\n", cmds(cmd("PING"))},
		{"pipeline_mixed", multibulk("SET", "a", "1") + "GET a\r\n" + multibulk("DEL", "a") + "PING\n",
			cmds(cmd("SET", "a", "1"), cmd("GET", "a"), cmd("DEL", "a"), cmd("PING"))},
		{"no_input", "", nil},
	}
	for _, tt := range tests {
		for _, c := range chunkings {
			t.Run(tt.name+"/"+c.name, func(t *testing.T) {
				rd := NewReader(c.wrap(strings.NewReader(tt.in)), Limits{})
				got, err := readAll(t, rd)
				if err != io.EOF {
					t.Fatalf("ends with %v, want io.EOF", err)
				}
				if !equalCmds(got, tt.want) {
					t.Fatalf("got %q, want %q", trim(got), trim(tt.want))
				}
			})
		}
	}
}

// trim keeps failure messages short.
func trim(c [][]string) [][]string {
	if len(c) > 4 {
		c = c[:4]
	}
	out := make([][]string, len(c))
	for i, a := range c {
		if len(a) > 4 {
			a = a[:4]
		}
		out[i] = make([]string, len(a))
		for j, s := range a {
			if len(s) > 40 {
				s = s[:40] + "…"
			}
			out[i][j] = s
		}
	}
	return out
}

func TestReadCommandErrors(t *testing.T) {
	const (
		mbulkLen   = "Protocol error: invalid multibulk length"
		bulkLen    = "Protocol error: invalid bulk length"
		inlineBig  = "Protocol error: too big inline request"
		mbulkBig   = "Protocol error: too big mbulk count string"
		bulkBig    = "Protocol error: too big bulk count string"
		unbalanced = "Protocol error: unbalanced quotes in request"
	)
	k64 := 64 << 10
	tests := []struct {
		name   string
		in     string
		lim    Limits
		before [][]string // commands read before the error
		want   string     // the error's Msg; "" for io.ErrUnexpectedEOF
	}{
		{name: "count_not_number", in: "*abc\r\n", want: mbulkLen},
		{name: "count_empty", in: "*\r\n", want: mbulkLen},
		{name: "count_leading_zero", in: "*01\r\n", want: mbulkLen},
		{name: "count_plus", in: "*+1\r\n", want: mbulkLen},
		{name: "count_minus_zero", in: "*-0\r\n", want: mbulkLen},
		{name: "count_space", in: "* 1\r\n", want: mbulkLen},
		{name: "count_overflow", in: "*99999999999999999999\r\n", want: mbulkLen},
		{name: "count_21_bytes", in: "*-100000000000000000000\r\n", want: mbulkLen},
		{name: "count_over_max_args", in: "*1048577\r\n", want: mbulkLen},
		{name: "count_over_configured_max_args", in: "*3\r\n", lim: Limits{MaxArgs: 2}, want: mbulkLen},
		{name: "bulk_negative", in: "*1\r\n$-1\r\n", want: bulkLen},
		{name: "bulk_over_512MiB", in: "*1\r\n$536870913\r\n", want: bulkLen},
		{name: "bulk_over_configured", in: "*1\r\n$11\r\n", lim: Limits{MaxBulk: 10}, want: bulkLen},
		{name: "bulk_leading_zero", in: "*1\r\n$01\r\n", want: bulkLen},
		{name: "bulk_empty", in: "*1\r\n$\r\n", want: bulkLen},
		{name: "bulk_not_number", in: "*1\r\n$1x\r\n", want: bulkLen},
		{name: "command_over_max_command", in: "*2\r\n$8\r\naaaaaaaa\r\n$8\r\n", lim: Limits{MaxBulk: 10, MaxCommand: 15}, want: bulkLen},
		{name: "expected_dollar", in: "*1\r\nX\r\n", want: "Protocol error: expected '$', got 'X'"},
		{name: "nested_array", in: "*1\r\n*1\r\n$1\r\na\r\n", want: "Protocol error: expected '$', got '*'"},
		{name: "integer_arg", in: "*2\r\n$3\r\nGET\r\n:1\r\n", want: "Protocol error: expected '$', got ':'"},
		{name: "empty_header_line", in: "*1\r\n\r\n", want: "Protocol error: expected '$', got '\r'"},
		{name: "expected_dollar_high_byte", in: "*1\r\n\xff\r\n", want: "Protocol error: expected '$', got '\xff'"},
		{name: "count_line_no_cr", in: "*" + strings.Repeat("1", k64-1), want: mbulkBig},
		{name: "count_line_64KiB_judged_on_value", in: "*" + strings.Repeat("1", k64-3) + "\r\n", want: mbulkLen},
		{name: "count_line_over_64KiB", in: "*" + strings.Repeat("1", k64-2) + "\r\n", want: mbulkBig},
		{name: "count_line_nul", in: "*1\x00\r\n" + strings.Repeat("x", k64), want: mbulkBig},
		{name: "count_line_nul_waits", in: "*1\x00\r\n$1\r\na\r\n", want: ""},
		{name: "bulk_line_no_cr", in: "*1\r\n$" + strings.Repeat("1", k64), want: bulkBig},
		{name: "bulk_line_checked_before_dollar", in: "*1\r\n" + strings.Repeat("X", 70000), want: bulkBig},
		{name: "bulk_line_nul", in: "*1\r\n$1\x00\r\na\r\n" + strings.Repeat("x", k64), want: bulkBig},
		{name: "inline_no_lf", in: "GET " + strings.Repeat("a", k64-4), want: inlineBig},
		{name: "inline_over_64KiB", in: "ECHO " + strings.Repeat("a", k64-5) + "\n", want: inlineBig},
		{name: "inline_nul", in: "GET a\x00b\r\n" + strings.Repeat("x", k64), want: inlineBig},
		{name: "inline_nul_waits", in: "GET a\x00b\r\nPING\r\n", want: ""},
		{name: "inline_over_configured", in: "GET abcdef\r\n", lim: Limits{MaxInline: 8}, want: inlineBig},
		{name: "inline_over_max_args", in: "a b c\r\n", lim: Limits{MaxArgs: 2}, want: inlineBig},
		{name: "inline_over_max_bulk", in: "SET k abcd\r\n", lim: Limits{MaxBulk: 3}, want: inlineBig},
		{name: "inline_over_max_command", in: "SET k abcd\r\n", lim: Limits{MaxCommand: 6}, want: inlineBig},
		{name: "unbalanced_double", in: "SET \"a b\r\n", want: unbalanced},
		{name: "unbalanced_single", in: "SET 'a b\r\n", want: unbalanced},
		{name: "text_after_double", in: "SET \"a\"b\r\n", want: unbalanced},
		{name: "text_after_single", in: "SET 'a'b\r\n", want: unbalanced},
		{name: "backslash_at_end", in: "SET \"a\\\r\n", want: unbalanced},
		{name: "error_after_commands", in: "PING\r\n" + multibulk("GET", "k") + "*x\r\n", before: cmds(cmd("PING"), cmd("GET", "k")), want: mbulkLen},
		{name: "eof_in_count", in: "*1", want: ""},
		{name: "eof_in_data", in: "*1\r\n$3\r\nfo", want: ""},
		{name: "eof_in_trailer", in: "*1\r\n$3\r\nfoo\r", want: ""},
		{name: "eof_before_bulk", in: "*2\r\n$3\r\nfoo\r\n", want: ""},
		{name: "eof_in_inline", in: "PING", want: ""},
	}
	for _, tt := range tests {
		for _, c := range chunkings {
			t.Run(tt.name+"/"+c.name, func(t *testing.T) {
				rd := NewReader(c.wrap(strings.NewReader(tt.in)), tt.lim)
				got, err := readAll(t, rd)
				if !equalCmds(got, tt.before) {
					t.Fatalf("read %q before the error, want %q", trim(got), trim(tt.before))
				}
				if tt.want == "" {
					if err != io.ErrUnexpectedEOF {
						t.Fatalf("error %v, want io.ErrUnexpectedEOF", err)
					}
					return
				}
				var pe *ProtocolError
				if !errors.As(err, &pe) || pe.Msg != tt.want || err.Error() != tt.want {
					t.Fatalf("error %q, want ProtocolError %q", err, tt.want)
				}
				if _, again := rd.ReadCommand(); again != err {
					t.Fatalf("next ReadCommand: %v, want the same error again", again)
				}
			})
		}
	}
}

func TestPipelinedOneWrite(t *testing.T) {
	var in strings.Builder
	var want [][]string
	for i := range 100 {
		k := fmt.Sprintf("key:%d", i)
		if i%2 == 0 {
			in.WriteString(multibulk("SET", k, strings.Repeat("v", i)))
			want = append(want, cmd("SET", k, strings.Repeat("v", i)))
		} else {
			in.WriteString("GET " + k + "\r\n")
			want = append(want, cmd("GET", k))
		}
	}
	src := &countingReader{r: strings.NewReader(in.String())}
	rd := NewReader(src, Limits{})
	for i, w := range want {
		args, err := rd.ReadCommand()
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		if got := toStrings(args); !equalCmds(cmds(got), cmds(w)) {
			t.Fatalf("command %d: %q, want %q", i, got, w)
		}
		if last := i == len(want)-1; (rd.Buffered() == 0) != last {
			t.Fatalf("after command %d of %d: Buffered() = %d", i, len(want), rd.Buffered())
		}
	}
	if src.reads != 1 {
		t.Fatalf("%d reads for one write's pipeline, want 1", src.reads)
	}
	if _, err := rd.ReadCommand(); err != io.EOF {
		t.Fatalf("after the pipeline: %v, want io.EOF", err)
	}
}

type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.reads++
	}
	return n, err
}

func toStrings(args [][]byte) []string {
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = string(a)
	}
	return s
}

func TestArgumentsDoNotOverlap(t *testing.T) {
	rd := NewReader(strings.NewReader(multibulk("SET", "k", "v")+"GET a b\r\n"), Limits{})
	for range 2 {
		args, err := rd.ReadCommand()
		if err != nil {
			t.Fatal(err)
		}
		before := toStrings(args)
		args[0] = append(args[0], "XYZ"...) // must not write over args[1]
		if got := string(args[1]); got != before[1] {
			t.Fatalf("appending to argument 0 changed argument 1 to %q", got)
		}
	}
}

func TestBigBulk(t *testing.T) {
	value := make([]byte, 4<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	in := multibulk("SET", "big", string(value)) + "PING\r\n"
	for _, c := range chunkings {
		if c.name == "one_byte" {
			continue // 4M reads: too slow under -race for what it adds
		}
		t.Run(c.name, func(t *testing.T) {
			rd := NewReader(c.wrap(strings.NewReader(in)), Limits{})
			args, err := rd.ReadCommand()
			if err != nil {
				t.Fatal(err)
			}
			if len(args) != 3 || string(args[0]) != "SET" || string(args[1]) != "big" || !bytes.Equal(args[2], value) {
				t.Fatalf("got %d args, value of %d bytes (equal: %v)", len(args), len(args[len(args)-1]), bytes.Equal(args[len(args)-1], value))
			}
			if cap(rd.arena) > 2*len(value) {
				t.Fatalf("a %d-byte argument took a %d-byte buffer", len(value), cap(rd.arena))
			}
			if args, err := rd.ReadCommand(); err != nil || string(args[0]) != "PING" {
				t.Fatalf("after the big command: %q, %v", args, err)
			}
			if cap(rd.arena) < len(value) {
				t.Fatalf("the pipelined command after the big one did not reuse its buffer (%d bytes)", cap(rd.arena))
			}
			if _, err := rd.ReadCommand(); err != io.EOF {
				t.Fatal(err)
			}
			if cap(rd.arena) > keepMax {
				t.Fatalf("idle with a %d-byte buffer", cap(rd.arena))
			}
		})
	}
}

// TestIdleDropsBigBuffer: a connection that goes idle after a big command
// does not keep its buffer while it waits.
func TestIdleDropsBigBuffer(t *testing.T) {
	in := multibulk("SET", "big", strings.Repeat("x", 3<<20))
	blocked := &probeReader{data: []byte(in)}
	rd := NewReader(blocked, Limits{})
	if _, err := rd.ReadCommand(); err != nil {
		t.Fatal(err)
	}
	blocked.probe = func() {
		if cap(rd.arena) > keepMax {
			t.Errorf("waiting for the next command with a %d-byte buffer", cap(rd.arena))
		}
	}
	if _, err := rd.ReadCommand(); err != io.EOF {
		t.Fatal(err)
	}
}

// probeReader serves data, then calls probe (if set) on each read at its
// end and returns io.EOF.
type probeReader struct {
	data  []byte
	probe func()
}

func (p *probeReader) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		if p.probe != nil {
			p.probe()
		}
		return 0, io.EOF
	}
	n := copy(b, p.data)
	p.data = p.data[n:]
	return n, nil
}

// TestDeclaredHugeBulk: a client declaring a 512 MiB argument makes the
// Reader hold about what it sent, not what it declared.
func TestDeclaredHugeBulk(t *testing.T) {
	for _, tt := range []struct {
		name string
		sent int
	}{
		{"10_bytes", 10},
		{"1MiB_in_1KiB_reads", 1 << 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870912\r\n" + strings.Repeat("v", tt.sent))
			src := &chunkReader{data: in, chunk: 1 << 10}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			rd := NewReader(src, Limits{})
			_, err := rd.ReadCommand()
			runtime.ReadMemStats(&after)
			if err != io.ErrUnexpectedEOF {
				t.Fatalf("error %v, want io.ErrUnexpectedEOF", err)
			}
			// Held: twice what was sent plus growFirst (doubling from a
			// first buffer of up to growFirst). In all: twice what is
			// held, plus the 64 KiB read buffer.
			if held := cap(rd.arena); held > 2*len(in)+growFirst {
				t.Fatalf("holding %d bytes for %d sent", held, len(in))
			}
			if got, bound := after.TotalAlloc-before.TotalAlloc, uint64(4*len(in)+2*growFirst+4*growChunk); got > bound {
				t.Fatalf("allocated %d bytes for %d sent, want at most %d", got, len(in), bound)
			}
		})
	}
}

// chunkReader returns data chunk bytes at a time, then io.EOF.
type chunkReader struct {
	data  []byte
	chunk int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.chunk)], c.data)
	c.data = c.data[n:]
	return n, nil
}

// TestDeclaredManyArgs: a declared count of 2^20 arguments does not make
// the Reader allocate room for them before they arrive.
func TestDeclaredManyArgs(t *testing.T) {
	in := []byte("*1048576\r\n$1\r\na\r\n")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rd := NewReader(bytes.NewReader(in), Limits{})
	_, err := rd.ReadCommand()
	runtime.ReadMemStats(&after)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("error %v, want io.ErrUnexpectedEOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 256<<10 {
		t.Fatalf("allocated %d bytes", got)
	}
}

var errTimeout = errors.New("i/o timeout")

// stepReader returns its steps in turn: data with an error, or none.
type stepReader struct {
	steps []step
}

type step struct {
	data string
	err  error
	n    int // returned instead of len(data) when non-zero
}

func (s *stepReader) Read(p []byte) (int, error) {
	if len(s.steps) == 0 {
		return 0, io.EOF
	}
	st := &s.steps[0]
	n := copy(p, st.data)
	if st.n != 0 {
		n = st.n
	} else if n < len(st.data) {
		st.data = st.data[n:] // the rest, and the error, next time
		return n, nil
	}
	err := st.err
	s.steps = s.steps[1:]
	return n, err
}

// TestReadErrorsResume: a read error (a deadline) is returned as is and
// the Reader goes on after it where it was.
func TestReadErrorsResume(t *testing.T) {
	big := strings.Repeat("b", 200<<10)
	in := multibulk("SET", "k", big)
	cut := len("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$204800\r\n") + 100<<10
	src := &stepReader{steps: []step{
		{err: errTimeout},
		{data: "*2\r\n$3\r\nGE"},
		{err: errTimeout},
		{data: "T\r\n$1\r"},
		{err: errTimeout},
		{data: "\nk\r\nPI", err: errTimeout}, // data and an error together
		{data: "NG\r\n"},
		{data: in[:cut]},
		{err: errTimeout},
		{data: in[cut:]},
	}}
	rd := NewReader(src, Limits{})
	var got [][]string
	timeouts := 0
	for {
		args, err := rd.ReadCommand()
		if err == errTimeout {
			timeouts++
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, toStrings(args))
	}
	want := cmds(cmd("GET", "k"), cmd("PING"), cmd("SET", "k", big))
	if timeouts != 5 || !equalCmds(got, want) {
		t.Fatalf("%d timeouts, commands %q; want 5 and %q", timeouts, trim(got), trim(want))
	}
}

func TestBadReaderDoesNotPanic(t *testing.T) {
	for _, n := range []int{-1, 1 << 30} {
		rd := NewReader(&stepReader{steps: []step{{data: "x", n: n}}}, Limits{})
		if _, err := rd.ReadCommand(); err == nil || err == io.EOF {
			t.Fatalf("a Read returning %d: %v", n, err)
		}
	}
	rd := NewReader(&stepReader{steps: make([]step, 200)}, Limits{})
	if _, err := rd.ReadCommand(); err != io.ErrNoProgress {
		t.Fatalf("200 empty reads: %v, want io.ErrNoProgress", err)
	}
}

// loopReader serves data over and over, as a client that never stops.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.data[l.off:])
		n += c
		l.off = (l.off + c) % len(l.data)
	}
	return n, nil
}

func TestSteadyStateNoAllocs(t *testing.T) {
	for _, tt := range []struct{ name, cmd string }{
		{"GET", multibulk("GET", "key:000000000001")},
		{"SET_4KiB", multibulk("SET", "key:000000000001", strings.Repeat("v", 4<<10))},
		{"inline_GET", "GET \"key:000000000001\"\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rd := NewReader(&loopReader{data: []byte(strings.Repeat(tt.cmd, 7))}, Limits{})
			for range 100 {
				if _, err := rd.ReadCommand(); err != nil {
					t.Fatal(err)
				}
			}
			if n := testing.AllocsPerRun(1000, func() {
				if _, err := rd.ReadCommand(); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Fatalf("%v allocations per command", n)
			}
		})
	}
	t.Run("Writer", func(t *testing.T) {
		w := NewWriter(io.Discard)
		small, big := make([]byte, 4<<10), make([]byte, 1<<20)
		segs := [][]byte{big[:512<<10], small, big[512<<10:]}
		run := func() {
			w.Array(3)
			w.Simple("OK")
			w.Int(12345)
			w.Bulk(small)
			w.Bulk(big)
			w.BulkSegments(segs)
			w.Null()
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		run()
		if n := testing.AllocsPerRun(100, run); n != 0 {
			t.Fatalf("%v allocations per reply batch", n)
		}
	})
}

func TestLimits(t *testing.T) {
	if err := (Limits{}).Validate(); err != nil {
		t.Fatal(err)
	}
	got := NewReader(nil, Limits{}).lim
	want := Limits{MaxBulk: 512 << 20, MaxArgs: 1 << 20, MaxInline: 64 << 10, MaxCommand: 512<<20 + 1<<20}
	if got != want {
		t.Fatalf("defaults %+v, want %+v", got, want)
	}
	if got := NewReader(nil, Limits{MaxBulk: 10}).lim.MaxCommand; got != 10+1<<20 {
		t.Fatalf("MaxCommand default with MaxBulk 10: %d", got)
	}
	if got := NewReader(nil, Limits{MaxBulk: math.MaxInt}).lim.MaxCommand; got != math.MaxInt {
		t.Fatalf("MaxCommand default with MaxBulk MaxInt: %d", got)
	}
	for _, tt := range []struct {
		field string
		lim   Limits
	}{
		{"MaxBulk", Limits{MaxBulk: -1}},
		{"MaxArgs", Limits{MaxArgs: -1}},
		{"MaxInline", Limits{MaxInline: -1}},
		{"MaxCommand", Limits{MaxCommand: -1}},
	} {
		err := tt.lim.Validate()
		if err == nil || !strings.Contains(err.Error(), "Limits."+tt.field+" ") {
			t.Errorf("%+v: %v, want an error naming %s", tt.lim, err, tt.field)
		}
		if got := NewReader(nil, tt.lim).lim; got != want {
			t.Errorf("NewReader(%+v) limits %+v, want the defaults", tt.lim, got)
		}
	}
}

// TestLongMaxInline: a MaxInline beyond the 64 KiB buffer grows it for the
// line, and the next command gives the memory back.
func TestLongMaxInline(t *testing.T) {
	long := strings.Repeat("a", 200<<10)
	in := "ECHO " + long + "\r\nPING\r\n"
	for _, c := range chunkings {
		t.Run(c.name, func(t *testing.T) {
			rd := NewReader(c.wrap(strings.NewReader(in)), Limits{MaxInline: 256 << 10})
			got, err := readAll(t, rd)
			if err != io.EOF || !equalCmds(got, cmds(cmd("ECHO", long), cmd("PING"))) {
				t.Fatalf("%q, %v", trim(got), err)
			}
			if len(rd.buf) != readBufferSize {
				t.Fatalf("buffer of %d bytes after the long line", len(rd.buf))
			}
		})
	}
}

func TestWriterBytes(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 10<<10) // 160 KiB
	tests := []struct {
		name  string
		write func(w *Writer)
		want  string
	}{
		{"simple", func(w *Writer) { w.Simple("OK") }, "+OK\r\n"},
		{"simple_crlf", func(w *Writer) { w.Simple("a\r\nb") }, "+a  b\r\n"},
		{"error", func(w *Writer) { w.Error("ERR unknown command 'FOO'") }, "-ERR unknown command 'FOO'\r\n"},
		{"error_crlf", func(w *Writer) { w.Error("ERR a\nb\rc") }, "-ERR a b c\r\n"},
		{"int_0", func(w *Writer) { w.Int(0) }, ":0\r\n"},
		{"int_negative", func(w *Writer) { w.Int(-42) }, ":-42\r\n"},
		{"int_max", func(w *Writer) { w.Int(math.MaxInt64) }, ":9223372036854775807\r\n"},
		{"int_min", func(w *Writer) { w.Int(math.MinInt64) }, ":-9223372036854775808\r\n"},
		{"bulk", func(w *Writer) { w.Bulk([]byte("foo")) }, "$3\r\nfoo\r\n"},
		{"bulk_binary", func(w *Writer) { w.Bulk([]byte("a\r\n\x00")) }, "$4\r\na\r\n\x00\r\n"},
		{"bulk_empty", func(w *Writer) { w.Bulk(nil) }, "$0\r\n\r\n"},
		{"bulk_big", func(w *Writer) { w.Simple("x"); w.Bulk(big) }, "+x\r\n$163840\r\n" + string(big) + "\r\n"},
		{"bulk_string", func(w *Writer) { w.BulkString("bar") }, "$3\r\nbar\r\n"},
		{"bulk_string_empty", func(w *Writer) { w.BulkString("") }, "$0\r\n\r\n"},
		{"bulk_string_big", func(w *Writer) { w.BulkString(string(big)) }, "$163840\r\n" + string(big) + "\r\n"},
		{"null", func(w *Writer) { w.Null() }, "$-1\r\n"},
		{"null_array", func(w *Writer) { w.NullArray() }, "*-1\r\n"},
		{"array", func(w *Writer) { w.Array(2); w.BulkString("a"); w.Int(1) }, "*2\r\n$1\r\na\r\n:1\r\n"},
		{"array_empty", func(w *Writer) { w.Array(0) }, "*0\r\n"},
		{"segments_none", func(w *Writer) { w.BulkSegments(nil) }, "$0\r\n\r\n"},
		{"segments_small", func(w *Writer) { w.BulkSegments([][]byte{[]byte("ab"), nil, []byte("cd")}) }, "$4\r\nabcd\r\n"},
		{"segments_mixed", func(w *Writer) {
			w.Int(1)
			w.BulkSegments([][]byte{big[:20<<10], []byte("mid"), big[20<<10:]})
			w.Int(2)
		}, ":1\r\n$163843\r\n" + string(big[:20<<10]) + "mid" + string(big[20<<10:]) + "\r\n:2\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			w := NewWriter(&out)
			tt.write(w)
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Fatalf("wrote %q, want %q", short(got), short(tt.want))
			}
			if w.Buffered() != 0 || w.Err() != nil {
				t.Fatalf("after Flush: Buffered %d, Err %v", w.Buffered(), w.Err())
			}
		})
	}
}

func short(s string) string {
	if len(s) > 80 {
		return s[:40] + "…" + s[len(s)-40:]
	}
	return s
}

// TestBulkSegmentsByReference: large segments are written as they are at
// Flush, small ones as they were at the call.
func TestBulkSegmentsByReference(t *testing.T) {
	large := bytes.Repeat([]byte("L"), refMin)
	small := bytes.Repeat([]byte("s"), refMin-1)
	var out bytes.Buffer
	w := NewWriter(&out)
	w.BulkSegments([][]byte{large, small})
	if got, want := w.Buffered(), len("$32767\r\n")+len(large)+len(small)+2; got != want {
		t.Fatalf("Buffered() = %d, want %d", got, want)
	}
	large[0], small[0] = 'X', 'Y'
	if out.Len() != 0 {
		t.Fatal("written before Flush")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	got := out.Bytes()[len("$32767\r\n"):]
	if got[0] != 'X' || got[len(large)] != 's' {
		t.Fatalf("large segment starts %q (want the change, X), small %q (want the copy, s)", got[0], got[len(large)])
	}
}

// TestBulkSegmentsConn round-trips replies with referenced segments
// through real connections: net.Pipe (one Write per buffer) and TCP
// loopback (writev).
func TestBulkSegmentsConn(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	seg := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	segs := [][]byte{seg(100 << 10), seg(10), seg(refMin), seg(1), seg(3 << 20), seg(refMin - 1)}
	var want bytes.Buffer
	want.WriteString("+OK\r\n")
	total := 0
	for _, s := range segs {
		total += len(s)
	}
	fmt.Fprintf(&want, "$%d\r\n", total)
	for _, s := range segs {
		want.Write(s)
	}
	want.WriteString("\r\n:7\r\n$-1\r\n")
	for _, tt := range []struct {
		name string
		pair func(t *testing.T) (client, server net.Conn)
	}{
		{"pipe", func(t *testing.T) (net.Conn, net.Conn) { return net.Pipe() }},
		{"tcp", tcpPair},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, s := tt.pair(t)
			defer c.Close()
			defer s.Close()
			got := make(chan []byte, 1)
			go func() {
				b := make([]byte, want.Len())
				_, err := io.ReadFull(c, b)
				if err != nil {
					b = nil
				}
				got <- b
			}()
			w := NewWriter(s)
			w.Simple("OK")
			w.BulkSegments(segs)
			w.Int(7)
			w.Null()
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if b := <-got; !bytes.Equal(b, want.Bytes()) {
				t.Fatalf("received %d bytes, not the %d written", len(b), want.Len())
			}
		})
	}
}

func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		c.Close()
		t.Fatal("accept failed")
	}
	return c, s
}

// TestWriterFlushesByItself: a long pipeline of replies goes out in
// writes of about 64 KiB, and the buffer does not grow past that.
func TestWriterFlushesByItself(t *testing.T) {
	var sizes []int
	var out bytes.Buffer
	w := NewWriter(writerFunc(func(p []byte) (int, error) {
		sizes = append(sizes, len(p))
		return out.Write(p)
	}))
	value := bytes.Repeat([]byte("v"), 1000)
	var want bytes.Buffer
	for i := range 1000 {
		w.Bulk(value)
		w.Int(int64(i))
		fmt.Fprintf(&want, "$1000\r\n%s\r\n:%d\r\n", value, i)
		if w.Buffered() > flushAt+1100 || cap(w.buf) > 2*flushAt {
			t.Fatalf("Buffered %d, buffer of %d bytes", w.Buffered(), cap(w.buf))
		}
	}
	if len(sizes) < 10 {
		t.Fatalf("%d writes before Flush for %d bytes", len(sizes), want.Len())
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want.Bytes()) {
		t.Fatal("the replies came out wrong")
	}
	for _, n := range sizes[:len(sizes)-1] {
		if n < flushAt/2 {
			t.Fatalf("a write of only %d bytes before Flush (all: %v)", n, sizes)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestWriterError(t *testing.T) {
	errFull := errors.New("disk full")
	for _, tt := range []struct {
		name string
		dst  io.Writer
		want error
	}{
		{"error", writerFunc(func([]byte) (int, error) { return 0, errFull }), errFull},
		{"short", writerFunc(func(p []byte) (int, error) { return len(p) - 1, nil }), io.ErrShortWrite},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWriter(tt.dst)
			w.Simple("OK")
			if err := w.Flush(); err != tt.want {
				t.Fatalf("Flush: %v, want %v", err, tt.want)
			}
			w.Bulk(make([]byte, 1<<20))
			w.BulkSegments([][]byte{make([]byte, 1<<20)})
			w.BulkString("x")
			w.Int(1)
			if w.Buffered() != 0 || w.Err() != tt.want || w.Flush() != tt.want {
				t.Fatalf("after the error: Buffered %d, Err %v", w.Buffered(), w.Err())
			}
		})
	}
	// A write failing inside Bulk (a large value goes out at once).
	w := NewWriter(writerFunc(func([]byte) (int, error) { return 0, errFull }))
	w.Bulk(make([]byte, 1<<20))
	if w.Err() != errFull || w.Buffered() != 0 {
		t.Fatalf("after a failed large Bulk: Err %v, Buffered %d", w.Err(), w.Buffered())
	}
	// A failing writev: the segments are released.
	c, s := net.Pipe()
	c.Close()
	w = NewWriter(s)
	w.BulkSegments([][]byte{make([]byte, 64<<10)})
	if err := w.Flush(); err == nil {
		t.Fatal("Flush to a closed pipe succeeded")
	}
	if w.refs != nil || w.Buffered() != 0 {
		t.Fatal("segments kept after a write error")
	}
}

// TestRoundTrip: what Writer encodes as an array of bulk strings, Reader
// reads back.
func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	args := [][]byte{[]byte("SET"), []byte("k\r\n"), bytes.Repeat([]byte{0, '\r', '\n', 0xff}, 100<<10)}
	for range 3 {
		w.Array(len(args))
		for _, a := range args {
			w.Bulk(a)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	rd := NewReader(&buf, Limits{})
	for range 3 {
		got, err := rd.ReadCommand()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(args) || !bytes.Equal(got[0], args[0]) || !bytes.Equal(got[1], args[1]) || !bytes.Equal(got[2], args[2]) {
			t.Fatal("read back different arguments")
		}
	}
	if _, err := rd.ReadCommand(); err != io.EOF {
		t.Fatal(err)
	}
}

// buffersRecorder is a BuffersWriter that records each call.
type buffersRecorder struct {
	calls []string // "write" or "buffers"
	out   bytes.Buffer
}

func (r *buffersRecorder) Write(p []byte) (int, error) {
	r.calls = append(r.calls, "write")
	return r.out.Write(p)
}

func (r *buffersRecorder) WriteBuffers(v *net.Buffers) (int64, error) {
	r.calls = append(r.calls, "buffers")
	return v.WriteTo(&r.out)
}

// TestWriterBuffersWriter: a reply with referenced segments reaches a
// BuffersWriter in one WriteBuffers call (one writev on a connection),
// header, segments and trailer together; small replies in one Write.
func TestWriterBuffersWriter(t *testing.T) {
	rec := &buffersRecorder{}
	w := NewWriter(rec)
	big := bytes.Repeat([]byte("x"), 64<<10)
	w.BulkSegments([][]byte{big[:32<<10], big[32<<10:]})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := "$65536\r\n" + string(big) + "\r\n"; rec.out.String() != want {
		t.Fatalf("wrote %d bytes, not the bulk of %d", rec.out.Len(), len(want))
	}
	w.Simple("OK")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rec.calls, ","); got != "buffers,write" {
		t.Fatalf("calls %s; want buffers (the bulk), write (+OK)", got)
	}
}

// commandReader serves cmd again and again, never past the end of one
// copy in a Read: the Reader finds nothing buffered after each command,
// as with a client that waits for each reply.
type commandReader struct {
	cmd []byte
	off int
}

func (c *commandReader) Read(p []byte) (int, error) {
	n := copy(p, c.cmd[c.off:])
	c.off = (c.off + n) % len(c.cmd)
	return n, nil
}

// TestOneMiBValuesReuseTheBuffer: a client sending one 1 MiB value after
// another, waiting for each reply, is served from one buffer: a new one
// per value costs a page fault per 4 KiB as it is first written (keepMax).
func TestOneMiBValuesReuseTheBuffer(t *testing.T) {
	rd := NewReader(&commandReader{cmd: []byte(multibulk("SET", "key:000000000001", strings.Repeat("v", 1<<20)))}, Limits{})
	for range 3 {
		if _, err := rd.ReadCommand(); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(20, func() {
		if _, err := rd.ReadCommand(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per 1 MiB SET read; want 0", n)
	}
}
