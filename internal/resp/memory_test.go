package resp

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// countingMemory is a Memory that counts what is reserved and can refuse.
type countingMemory struct {
	t        *testing.T
	rd       *Reader
	reserved int
	peak     int
	refuse   error // returned by Reserve when not nil
}

func (m *countingMemory) Reserve(n int) error {
	if n <= 0 {
		m.t.Errorf("Reserve(%d)", n)
	}
	if m.refuse != nil {
		return m.refuse
	}
	m.reserved += n
	m.peak = max(m.peak, m.reserved)
	return nil
}

func (m *countingMemory) Release(n int) {
	if n <= 0 || n > m.reserved {
		m.t.Errorf("Release(%d) with %d reserved", n, m.reserved)
	}
	m.reserved -= n
}

// check fails when the Reader holds more than FreeHeld plus what it
// reserved.
func (m *countingMemory) check(when string) {
	m.t.Helper()
	if held := m.rd.Held(); held > m.rd.free+m.reserved {
		m.t.Fatalf("%s: holding %d bytes with %d reserved (free %d)", when, held, m.reserved, m.rd.free)
	}
}

func manyEmpty(n int) string {
	var b strings.Builder
	b.WriteString("*" + itoa(n) + "\r\n")
	for range n {
		b.WriteString("$0\r\n\r\n")
	}
	return b.String()
}

func itoa(n int) string {
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(buf[i:])
		}
	}
}

// TestMemoryCountsEverything: what a Reader holds beyond FreeHeld is
// reserved before it is allocated, argument slots included (a command of
// many empty arguments costs ArgOverhead each), and given back when the
// Reader drops its buffers.
func TestMemoryCountsEverything(t *testing.T) {
	big := strings.Repeat("v", 3<<20)
	for _, tt := range []struct {
		name string
		in   string
		min  int // reserved at least this while the command is held
	}{
		{"many_empty_args", manyEmpty(1 << 16), (1<<16)*ArgOverhead - FreeHeld},
		{"big_bulk", multibulk("SET", "k", big), len(big) - FreeHeld},
		{"big_inline", "SET k " + strings.Repeat("x", 60<<10) + "\r\n", 0},
		{"many_inline_words", strings.Repeat("a ", 30000) + "\r\n", 30000*ArgOverhead - FreeHeld},
	} {
		for _, c := range []struct {
			name string
			wrap func(io.Reader) io.Reader
		}{{"whole", func(r io.Reader) io.Reader { return r }}, {"half", iotest.HalfReader}} {
			t.Run(tt.name+"/"+c.name, func(t *testing.T) {
				m := &countingMemory{t: t}
				rd := NewReader(c.wrap(strings.NewReader(tt.in+"PING\r\n")), Limits{})
				m.rd = rd
				rd.SetMemory(m)
				if _, err := rd.ReadCommand(); err != nil {
					t.Fatal(err)
				}
				m.check("after the command")
				if m.reserved < tt.min {
					t.Fatalf("reserved %d bytes, want at least %d", m.reserved, tt.min)
				}
				if _, err := rd.ReadCommand(); err != nil {
					t.Fatal(err)
				}
				m.check("after PING")
				rd.Shrink()
				if m.reserved != 0 || rd.Held() != 0 {
					t.Fatalf("after Shrink: %d reserved, %d held; want none", m.reserved, rd.Held())
				}
				if _, err := rd.ReadCommand(); err != io.EOF {
					t.Fatalf("at the end: %v", err)
				}
			})
		}
	}
}

// TestMemoryRefused: a Reserve error is ReadCommand's, the Reader keeps
// its place, and once Reserve succeeds the same command is read whole.
func TestMemoryRefused(t *testing.T) {
	errFull := errors.New("budget full")
	big := strings.Repeat("v", 1<<20)
	for _, in := range []string{
		multibulk("SET", "k", big),
		manyEmpty(1 << 12),
		strings.Repeat("a ", 30000) + "\r\n",
	} {
		m := &countingMemory{t: t, refuse: errFull}
		rd := NewReader(iotest.HalfReader(strings.NewReader(in)), Limits{})
		m.rd = rd
		rd.SetMemory(m)
		refusals := 0
		var args [][]byte
		var err error
		for {
			args, err = rd.ReadCommand()
			if err != errFull {
				break
			}
			m.check("refused")
			refusals++
			if refusals%3 == 0 {
				m.refuse = nil // let it through for a while
			}
			if refusals > 1000 {
				t.Fatal("no progress")
			}
		}
		if err != nil {
			t.Fatalf("%.20q...: %v after %d refusals", in, err, refusals)
		}
		if refusals == 0 {
			t.Fatalf("%.20q...: never refused", in)
		}
		var b bytes.Buffer
		w := NewWriter(&b)
		w.Array(len(args))
		for _, a := range args {
			w.Bulk(a)
		}
		w.Flush()
		if in[0] == '*' && b.String() != in {
			t.Fatalf("%.20q...: read back differently after refusals", in)
		}
		if in[0] != '*' && len(args) != 30000 {
			t.Fatalf("inline: %d words, want 30000", len(args))
		}
	}
}

// TestShrinkIdle: a Reader idle after a big command holds nothing once
// shrunk (a server shrinks its idle connections), and reads on after.
func TestShrinkIdle(t *testing.T) {
	in := multibulk("SET", "big", strings.Repeat("x", 900<<10))
	src := &stepReader{steps: []step{{data: in}, {err: errTimeout}, {data: "PING\r\n"}}}
	rd := NewReader(src, Limits{})
	if _, err := rd.ReadCommand(); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.ReadCommand(); err != errTimeout {
		t.Fatalf("idle: %v, want the timeout", err)
	}
	if rd.Held() < 900<<10 {
		t.Fatalf("holding %d bytes idle before Shrink: the test no longer tests anything", rd.Held())
	}
	rd.Shrink()
	if rd.Held() != 0 || rd.buf != nil {
		t.Fatalf("after Shrink: %d bytes held, read buffer of %d", rd.Held(), len(rd.buf))
	}
	if args, err := rd.ReadCommand(); err != nil || string(args[0]) != "PING" {
		t.Fatalf("after Shrink: %q, %v", args, err)
	}
}

// TestShrinkWaitsSmall: a shrunk Reader waits for the next command
// without a read buffer, and reads every form of command after, in any
// chunking.
func TestShrinkWaitsSmall(t *testing.T) {
	in := multibulk("SET", "k", strings.Repeat("v", 3000)) + "GET k\r\n" + multibulk("PING")
	for _, c := range chunkings {
		t.Run(c.name, func(t *testing.T) {
			var rd *Reader
			check := readerFunc(func(p []byte) (int, error) {
				if rd.st == stIdle && rd.buf != nil {
					t.Errorf("waiting for a command with a %d-byte read buffer after Shrink", len(rd.buf))
				}
				return 0, nil
			})
			src := c.wrap(&probeReader{data: []byte(in)})
			rd = NewReader(nil, Limits{})
			rd.src = readerFunc(func(p []byte) (int, error) {
				check.Read(p)
				return src.Read(p)
			})
			rd.Shrink()
			var got [][]string
			for {
				args, err := rd.ReadCommand()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, toStrings(args))
				rd.Shrink()
			}
			want := cmds(cmd("SET", "k", strings.Repeat("v", 3000)), cmd("GET", "k"), cmd("PING"))
			if !equalCmds(got, want) {
				t.Fatalf("got %q", trim(got))
			}
		})
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
