package resp

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

var update = flag.Bool("update", false, "rewrite the FuzzReadCommand seed corpus in testdata/fuzz")

const regenerate = "go test ./internal/resp -run TestSeedCorpus -update"

// fuzzLimits are small so the fuzzer reaches every limit.
var fuzzLimits = Limits{MaxBulk: 40, MaxArgs: 6, MaxInline: 48, MaxCommand: 100}

// protocolMessages are the texts a ProtocolError may carry, the "expected
// '$'" one aside.
var protocolMessages = []string{
	msgMultibulkLen, msgBulkLen, msgInlineTooBig, msgMbulkTooBig, msgBulkTooBig, msgUnbalancedQts,
}

// FuzzReadCommand feeds arbitrary bytes to a Reader, whole and one byte
// at a time. Nothing may panic; both ways must read the same commands and
// end with the same error, a known one; every command is within the
// limits, and the Reader holds about what it was sent; and every command,
// re-encoded as a multibulk by Writer, reads back the same.
// Seeds: testdata/fuzz/FuzzReadCommand (TestSeedCorpus writes them).
func FuzzReadCommand(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		whole, err := fuzzRead(t, bytes.NewReader(data), len(data))
		bytewise, err1 := fuzzRead(t, iotest.OneByteReader(bytes.NewReader(data)), len(data))
		if !equalCmds(whole, bytewise) || !sameError(err, err1) {
			t.Fatalf("whole: %q, %v; one byte at a time: %q, %v", trim(whole), err, trim(bytewise), err1)
		}
		// With a Memory refusing every other reservation (each retried)
		// and the Reader shrunk between commands, as a server does.
		hard, err2 := fuzzReadHard(t, iotest.HalfReader(bytes.NewReader(data)), len(data))
		if !equalCmds(whole, hard) || !sameError(err, err2) {
			t.Fatalf("whole: %q, %v; refused and shrunk: %q, %v", trim(whole), err, trim(hard), err2)
		}
		for _, c := range whole {
			var enc bytes.Buffer
			w := NewWriter(&enc)
			w.Array(len(c))
			for _, a := range c {
				w.BulkString(a)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			back, err := fuzzRead(t, &enc, enc.Len())
			if err != io.EOF || !equalCmds(back, cmds(c)) {
				t.Fatalf("%q re-encoded reads back as %q, %v", c, trim(back), err)
			}
		}
	})
}

// fuzzRead reads commands from rd until an error and checks each against
// the limits.
func fuzzRead(t *testing.T, rd io.Reader, sent int) ([][]string, error) {
	r := NewReader(rd, fuzzLimits)
	var out [][]string
	for {
		args, err := r.ReadCommand()
		// Held: the arena grows by append (at most about twice what it
		// holds) or by doubling ahead of data (see growChunk).
		if held := cap(r.arena); held > 2*sent+64 && held > growChunk {
			t.Fatalf("arena of %d bytes for %d sent", held, sent)
		}
		if err != nil {
			var pe *ProtocolError
			switch {
			case err == io.EOF, err == io.ErrUnexpectedEOF:
			case errors.As(err, &pe) && (slices.Contains(protocolMessages, pe.Msg) ||
				strings.HasPrefix(pe.Msg, msgExpected) && len(pe.Msg) == len(msgExpected)+2 && strings.HasSuffix(pe.Msg, "'")):
			default:
				t.Fatalf("unexpected error %v", err)
			}
			return out, err
		}
		if len(args) == 0 || len(args) > fuzzLimits.MaxArgs {
			t.Fatalf("a command of %d arguments", len(args))
		}
		total := 0
		c := make([]string, len(args))
		for i, a := range args {
			if len(a) > fuzzLimits.MaxBulk {
				t.Fatalf("an argument of %d bytes", len(a))
			}
			total += len(a)
			c[i] = string(a)
		}
		if total > fuzzLimits.MaxCommand {
			t.Fatalf("a command of %d bytes", total)
		}
		out = append(out, c)
	}
}

// flakyMemory refuses every other reservation.
type flakyMemory struct {
	countingMemory
	n int
}

var errRefused = errors.New("refused")

func (m *flakyMemory) Reserve(n int) error {
	m.n++
	if m.n%2 == 1 {
		return errRefused
	}
	return m.countingMemory.Reserve(n)
}

// fuzzReadHard is fuzzRead with a flakyMemory, retrying each refusal, and
// Shrink after every command; it checks that what the Reader holds beyond
// FreeHeld is reserved, and that it all goes back.
func fuzzReadHard(t *testing.T, rd io.Reader, sent int) ([][]string, error) {
	r := NewReader(rd, fuzzLimits)
	r.free = 0 // every byte reserved: fuzzLimits are far below FreeHeld
	m := &flakyMemory{countingMemory: countingMemory{t: t, rd: r}}
	r.SetMemory(m)
	var out [][]string
	for {
		args, err := r.ReadCommand()
		if err == errRefused {
			continue
		}
		m.check("fuzz")
		if err != nil {
			if r.st == stIdle {
				r.Shrink()
				if m.reserved != 0 {
					t.Fatalf("%d bytes reserved after Shrink", m.reserved)
				}
			}
			return out, err
		}
		c := make([]string, len(args))
		for i, a := range args {
			c[i] = string(a)
		}
		out = append(out, c)
		r.Shrink()
	}
}

func sameError(a, b error) bool {
	var pa, pb *ProtocolError
	if errors.As(a, &pa) && errors.As(b, &pb) {
		return pa.Msg == pb.Msg
	}
	return a == b
}

// seedCorpus returns the FuzzReadCommand seeds: valid requests of each
// form, and bad ones of each kind, under fuzzLimits.
func seedCorpus() map[string]string {
	return map[string]string{
		"valid_multibulk_get":      multibulk("GET", "key:1"),
		"valid_multibulk_binary":   multibulk("SET", "k", "a\r\n\x00\xff"),
		"valid_multibulk_empty":    "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n",
		"valid_empty_commands":     "*0\r\n*-1\r\n\r\n  \n",
		"valid_inline":             "SET k v\r\nGET k\n",
		"valid_inline_quotes":      `SET "a b" '\'c' "\x41\n\\" ""` + "\r\n",
		"valid_pipeline_mixed":     multibulk("SET", "a", "1") + "GET a\r\n" + multibulk("DEL", "a"),
		"valid_trailer_unchecked":  "*1\rX$3\rYfooZZ",
		"bad_garbage":              "\x8a\x01*\xfe$\x00\r\x13\"'\\x\n\xff\xff",
		"bad_huge_bulk":            "*1\r\n$536870912\r\nabc",
		"bad_bulk_over_limit":      "*1\r\n$41\r\n",
		"bad_huge_count":           "*99999999999999999999\r\n",
		"bad_count_over_limit":     "*7\r\n",
		"bad_negative_bulk":        "*1\r\n$-1\r\n",
		"bad_command_over_limit":   "*3\r\n$40\r\n" + strings.Repeat("a", 40) + "\r\n$40\r\n" + strings.Repeat("b", 40) + "\r\n$40\r\n",
		"bad_nested":               "*1\r\n*1\r\n$1\r\na\r\n",
		"bad_expected_dollar":      "*1\r\n:1\r\n",
		"bad_unbalanced":           "SET \"a\r\n",
		"bad_quote_then_text":      "SET 'a'b\r\n",
		"bad_count_line_too_long":  "*" + strings.Repeat("1", 60),
		"bad_bulk_line_too_long":   "*1\r\n$" + strings.Repeat("1", 60),
		"bad_inline_too_long":      "GET " + strings.Repeat("k", 60) + "\r\n",
		"bad_nul_in_line":          "GET a\x00b\r\n" + strings.Repeat("x", 60),
		"bad_truncated_multibulk":  multibulk("SET", "k", "value")[:15],
		"bad_leading_zero_count":   "*01\r\n",
		"bad_minus_zero_bulk":      "*1\r\n$-0\r\n",
		"bad_inline_over_max_args": "a b c d e f g\r\n",
	}
}

// TestSeedCorpus keeps testdata/fuzz/FuzzReadCommand in step with
// seedCorpus: with -update it rewrites the seed files, otherwise it
// checks them.
func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReadCommand")
	seeds := seedCorpus()
	for name, s := range seeds {
		path := filepath.Join(dir, name)
		want := []byte("go test fuzz v1\n[]byte(" + strconv.Quote(s) + ")\n")
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run %s)", err, regenerate)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale (run %s)", path, regenerate)
		}
	}
	// The seeds are what their names say: valid ones read to io.EOF, bad
	// ones fail.
	for name, s := range seeds {
		_, err := fuzzRead(t, strings.NewReader(s), len(s))
		if valid := strings.HasPrefix(name, "valid_"); valid != (err == io.EOF) {
			t.Errorf("seed %s: reading ends with %v", name, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := seeds[e.Name()]; !ok && !strings.HasPrefix(e.Name(), "found_") {
			t.Errorf("%s: not a generated seed (keep inputs the fuzzer found as found_<name>)", e.Name())
		}
	}
}
