package trace

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/kvpool/kvpool/trace/tracetest"
)

// sharedTrace returns the path of a published trace in $KVPOOL_TRACE_DIR,
// skipping the test if it is not there (see trace/tracetest).
func sharedTrace(tb testing.TB, file string) string {
	tb.Helper()
	return tracetest.Path(tb, file)
}

const (
	good1 = `{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}`
	good2 = `{"timestamp": 5, "input_length": 512, "output_length": 3, "hash_ids": [0]}`
)

func readAll(t *testing.T, in string, opts ReadOptions) ([]Request, *Reader, error) {
	t.Helper()
	r := NewReader(strings.NewReader(in), "t.jsonl", opts)
	var out []Request
	for {
		req, err := r.Next()
		if err == io.EOF {
			return out, r, nil
		}
		if err != nil {
			return out, r, err
		}
		out = append(out, req)
	}
}

func TestReaderGood(t *testing.T) {
	want := []Request{
		{Timestamp: 0, InputLength: 1000, OutputLength: 10, HashIDs: []uint64{0, 1}},
		{Timestamp: 5, InputLength: 512, OutputLength: 3, HashIDs: []uint64{0}},
	}
	tests := []struct {
		name string
		in   string
		want []Request
	}{
		{"two lines", good1 + "\n" + good2 + "\n", want},
		{"no trailing newline", good1 + "\n" + good2, want},
		{"blank lines skipped", "\n" + good1 + "\n\n  \t\n" + good2 + "\n\n", want},
		{"crlf", good1 + "\r\n" + good2 + "\r\n", want},
		{"empty input", "", nil},
		{"only blank", "\n\n", nil},
		{"field order and spacing free", `{"hash_ids":[0,1],"output_length":10,"input_length":1000,"timestamp":0}` + "\n" + good2, want},
		{"unknown fields ignored", `{"timestamp": 0, "x": {"a": [1, "]"]}, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1], "y": null}` + "\n" + good2, want},
		{"escaped key", `{"time\u0073tamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}` + "\n" + good2, want},
		{"equal timestamps", good2 + "\n" + good2, []Request{want[1], want[1]}},
		{"big ids", `{"timestamp": 9223372036854775807, "input_length": 1, "output_length": 1, "hash_ids": [18446744073709551615]}`,
			[]Request{{Timestamp: 9223372036854775807, InputLength: 1, OutputLength: 1, HashIDs: []uint64{18446744073709551615}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := readAll(t, tt.in, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestReaderBad covers every kind of bad line: the strict reader fails with
// a *LineError naming the line, and the lenient reader skips exactly it.
func TestReaderBad(t *testing.T) {
	tests := []struct {
		name   string
		line   string
		kind   Kind
		reason string // substring of the reason
	}{
		{"invalid json", `{"timestamp": 0, "input_length": 1000,`, KindSyntax, "invalid JSON"},
		{"garbage", `hello`, KindSyntax, "invalid JSON"},
		{"trailing garbage", good1 + ` x`, KindSyntax, "after the object"},
		{"trailing comma", `{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1],}`, KindSyntax, "field name"},
		{"leading zero", `{"timestamp": 01, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}`, KindSyntax, "invalid JSON"},
		{"bad unknown value", `{"x": tru, "timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}`, KindSyntax, `"x"`},
		{"unterminated string", `{"timestamp": "0`, KindSyntax, "unterminated"},
		{"array line", `[1, 2]`, KindNotObject, "array"},
		{"number line", `42`, KindNotObject, "number"},
		{"missing timestamp", `{"input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}`, KindMissingField, `"timestamp"`},
		{"missing hash_ids", `{"timestamp": 0, "input_length": 1000, "output_length": 10}`, KindMissingField, `"hash_ids"`},
		{"empty object", `{}`, KindMissingField, `"timestamp"`},
		{"duplicate field", `{"timestamp": 0, "timestamp": 1, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}`, KindDuplicateField, `"timestamp"`},
		{"string timestamp", `{"timestamp": "0", "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}`, KindWrongType, "timestamp: want an integer, got a string"},
		{"null timestamp", `{"timestamp": null, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}`, KindWrongType, "got a null"},
		{"float length", `{"timestamp": 0, "input_length": 1000.5, "output_length": 10, "hash_ids": [0, 1]}`, KindWrongType, "input_length: want an integer, got 1000.5"},
		{"exponent length", `{"timestamp": 0, "input_length": 1e3, "output_length": 10, "hash_ids": [0, 1]}`, KindWrongType, "got 1e3"},
		{"overflow timestamp", `{"timestamp": 9223372036854775808, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}`, KindWrongType, "out of range"},
		{"hash_ids not array", `{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": "0,1"}`, KindWrongType, "hash_ids: want an array, got a string"},
		{"float hash id", `{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1.5]}`, KindWrongType, "hash_ids[1]: want a non-negative integer, got 1.5"},
		{"negative hash id", `{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [-1, 1]}`, KindWrongType, "hash_ids[0]: want a non-negative integer, got -1"},
		{"string hash id", `{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, "1"]}`, KindWrongType, "hash_ids[1]: want a non-negative integer, got a string"},
		{"overflow hash id", `{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, 18446744073709551616]}`, KindWrongType, "out of range"},
		{"zero input", `{"timestamp": 0, "input_length": 0, "output_length": 10, "hash_ids": []}`, KindBadLength, "input_length 0"},
		{"negative input", `{"timestamp": 0, "input_length": -5, "output_length": 10, "hash_ids": []}`, KindBadLength, "input_length -5"},
		{"zero output", `{"timestamp": 0, "input_length": 1000, "output_length": 0, "hash_ids": [0, 1]}`, KindBadLength, "output_length 0"},
		{"negative output", `{"timestamp": 0, "input_length": 1000, "output_length": -1, "hash_ids": [0, 1]}`, KindBadLength, "output_length -1"},
		{"negative timestamp", `{"timestamp": -1, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}`, KindNegativeTimestamp, "timestamp -1"},
		{"too few ids", `{"timestamp": 0, "input_length": 1025, "output_length": 10, "hash_ids": [0, 1]}`, KindBlockCount, "hash_ids has 2 ids, want ceil(1025/512) = 3"},
		{"too many ids", `{"timestamp": 0, "input_length": 512, "output_length": 10, "hash_ids": [0, 1]}`, KindBlockCount, "want ceil(512/512) = 1"},
		{"backwards", `{"timestamp": 4, "input_length": 512, "output_length": 10, "hash_ids": [0]}`, KindBackwards, "timestamp 4 goes backwards (line 2 has 5)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Line 1 and 2 good, line 3 bad, line 4 good (timestamp 5).
			in := good1 + "\n" + good2 + "\n" + tt.line + "\n" + good2 + "\n"

			got, _, err := readAll(t, in, ReadOptions{})
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("strict: err = %v, want *LineError", err)
			}
			if le.File != "t.jsonl" || le.Line != 3 || le.Kind != tt.kind || !strings.Contains(le.Reason, tt.reason) {
				t.Fatalf("strict: got %+v (kind %v), want line 3 kind %v reason containing %q", le, le.Kind, tt.kind, tt.reason)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "t.jsonl:3: ") || strings.Contains(msg, "\n") {
				t.Fatalf("strict: error %q is not one line file:line: reason", msg)
			}
			if len(got) != 2 {
				t.Fatalf("strict: got %d requests before the error, want 2", len(got))
			}

			got, r, err := readAll(t, in, ReadOptions{Lenient: true})
			if err != nil {
				t.Fatalf("lenient: %v", err)
			}
			if len(got) != 3 {
				t.Fatalf("lenient: got %d requests, want 3", len(got))
			}
			sk := r.Skipped()
			want := Skipped{Total: 1, ByKind: []SkipCount{{Kind: tt.kind, Count: 1, FirstLine: 3, FirstReason: le.Reason}}}
			if !reflect.DeepEqual(sk, want) {
				t.Fatalf("lenient: Skipped = %+v, want %+v", sk, want)
			}
		})
	}
}

func TestReaderStrictErrorIsSticky(t *testing.T) {
	r := NewReader(strings.NewReader("x\n"+good1+"\n"), "s", ReadOptions{})
	_, err1 := r.Next()
	_, err2 := r.Next()
	if err1 == nil || err1 != err2 {
		t.Fatalf("errors %v then %v, want the same non-nil error twice", err1, err2)
	}
}

func TestReaderBackwardsRelativeToGoodLine(t *testing.T) {
	// Line 2 is bad (timestamp 100 but wrong block count); line 3 at 50 is
	// fine because the previous GOOD line is line 1 at 10.
	in := strings.Join([]string{
		`{"timestamp": 10, "input_length": 1, "output_length": 1, "hash_ids": [0]}`,
		`{"timestamp": 100, "input_length": 1, "output_length": 1, "hash_ids": []}`,
		`{"timestamp": 50, "input_length": 1, "output_length": 1, "hash_ids": [0]}`,
		`{"timestamp": 40, "input_length": 1, "output_length": 1, "hash_ids": [0]}`,
	}, "\n")
	got, r, err := readAll(t, in, ReadOptions{Lenient: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Timestamp != 50 {
		t.Fatalf("got %+v, want the requests at 10 and 50", got)
	}
	sk := r.Skipped()
	if sk.Total != 2 || len(sk.ByKind) != 2 || sk.ByKind[0].Kind != KindBlockCount || sk.ByKind[1].Kind != KindBackwards || sk.ByKind[1].FirstLine != 4 {
		t.Fatalf("Skipped = %+v", sk)
	}
	want := "skipped 2 bad lines: hash_ids count mismatch: 1 (first at line 2), timestamp goes backwards: 1 (first at line 4)"
	if sk.String() != want {
		t.Fatalf("String() = %q, want %q", sk.String(), want)
	}
}

func TestReaderLongLines(t *testing.T) {
	// A valid line with 20,000 ids (about 140 KB, more than the bufio buffer).
	n := 20000
	req := Request{Timestamp: 1, InputLength: n * BlockTokens, OutputLength: 1, HashIDs: make([]uint64, n)}
	for i := range req.HashIDs {
		req.HashIDs[i] = uint64(1_000_000 + i)
	}
	long := string(AppendLine(nil, req))
	t.Run("long line reads", func(t *testing.T) {
		got, _, err := readAll(t, good1+"\n"+long+good2+"\n", ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || !reflect.DeepEqual(got[1], req) {
			t.Fatalf("long request did not round-trip")
		}
	})
	t.Run("too long strict", func(t *testing.T) {
		_, _, err := readAll(t, good1+"\n"+long+good2+"\n", ReadOptions{MaxLineBytes: 100_000})
		var le *LineError
		if !errors.As(err, &le) || le.Line != 2 || le.Kind != KindTooLong {
			t.Fatalf("err = %v, want line 2 too long", err)
		}
	})
	t.Run("too long lenient, no newline at end", func(t *testing.T) {
		got, r, err := readAll(t, good1+"\n"+long+good2+"\n"+strings.TrimSuffix(long, "\n"), ReadOptions{Lenient: true, MaxLineBytes: 100_000})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[1].Timestamp != 5 {
			t.Fatalf("got %d requests, want the 2 short ones", len(got))
		}
		sk := r.Skipped()
		if sk.Total != 2 || sk.ByKind[0].Kind != KindTooLong || sk.ByKind[0].FirstLine != 2 {
			t.Fatalf("Skipped = %+v", sk)
		}
	})
	t.Run("exactly the limit", func(t *testing.T) {
		_, _, err := readAll(t, good1+"\n", ReadOptions{MaxLineBytes: len(good1)})
		if err != nil {
			t.Fatalf("a line of exactly MaxLineBytes: %v", err)
		}
		_, _, err = readAll(t, good1+"\n", ReadOptions{MaxLineBytes: len(good1) - 1})
		if err == nil {
			t.Fatal("a line one byte over MaxLineBytes was accepted")
		}
	})
}

// endless yields '[' forever: a line with no end.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), e.n)
	for i := range p[:k] {
		p[i] = '['
	}
	e.n -= k
	return int(k), nil
}

// TestReaderHugeLineDefaultLimit feeds a 65 MiB line through the default
// limit: it must be an error (not an out-of-memory crash or a hang).
func TestReaderHugeLineDefaultLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 65 MiB")
	}
	r := NewReader(io.MultiReader(&endless{n: DefaultMaxLineBytes + 1<<20}, strings.NewReader("\n"+good1+"\n")), "huge", ReadOptions{Lenient: true})
	req, err := r.Next()
	if err != nil || req.InputLength != 1000 {
		t.Fatalf("got %+v, %v; want the good line after the huge one", req, err)
	}
	if sk := r.Skipped(); sk.Total != 1 || sk.ByKind[0].Kind != KindTooLong {
		t.Fatalf("Skipped = %+v", sk)
	}
}

func TestReaderIOError(t *testing.T) {
	boom := errors.New("boom")
	for _, lenient := range []bool{false, true} {
		r := NewReader(io.MultiReader(strings.NewReader(good1+"\n"), iotest.ErrReader(boom)), "io", ReadOptions{Lenient: lenient})
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		_, err := r.Next()
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "io") {
			t.Fatalf("lenient=%v: err = %v, want wrapped boom naming the file", lenient, err)
		}
	}
}

func TestReaderDeepNesting(t *testing.T) {
	nested := func(depth int, closed bool) string {
		s := `{"x": ` + strings.Repeat("[", depth)
		if closed {
			s += strings.Repeat("]", depth) + `, "timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}`
		}
		return s
	}
	got, _, err := readAll(t, nested(1000, true), ReadOptions{})
	if err != nil || len(got) != 1 {
		t.Fatalf("nested unknown field: %v", err)
	}
	// Beyond encoding/json's nesting limit (10,000) and unterminated: an
	// error, never a stack overflow.
	for _, closed := range []bool{true, false} {
		_, _, err = readAll(t, nested(1_000_000, closed), ReadOptions{})
		var le *LineError
		if !errors.As(err, &le) || le.Kind != KindSyntax {
			t.Fatalf("nesting 1e6 (closed %v): err = %v, want a syntax error", closed, err)
		}
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.jsonl")
	if err := os.WriteFile(p, []byte(good1+"\n"+good2+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(p, ReadOptions{})
	if err != nil || len(got) != 2 {
		t.Fatalf("ReadFile = %d requests, %v", len(got), err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.jsonl"), ReadOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err = %v, want ErrNotExist", err)
	}
	if _, err := ReadFile(p, ReadOptions{MaxLineBytes: -1}); err == nil || !strings.Contains(err.Error(), "MaxLineBytes") {
		t.Fatalf("bad options: err = %v, want one naming MaxLineBytes", err)
	}
}

// TestPublishedTracesRoundTrip reads each published trace strictly and
// writes it back: the bytes must be identical.
func TestPublishedTracesRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		file string
		n    int
	}{{"conversation_trace.jsonl", 12031}, {"synthetic_trace.jsonl", 3993}} {
		t.Run(tt.file, func(t *testing.T) {
			p := sharedTrace(t, tt.file)
			orig, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			reqs, err := ReadFile(p, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != tt.n {
				t.Fatalf("read %d requests, want %d", len(reqs), tt.n)
			}
			var buf bytes.Buffer
			w := NewWriter(&buf)
			for _, r := range reqs {
				if err := w.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), orig) {
				t.Fatal("Writer output differs from the published file")
			}
		})
	}
}

func BenchmarkReadConversation(b *testing.B) {
	p := sharedTrace(b, "conversation_trace.jsonl")
	data, err := os.ReadFile(p)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	n := 0
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), p, ReadOptions{})
		n = 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
