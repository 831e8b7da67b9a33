package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// DefaultMaxLineBytes bounds the length of one trace line (without its
// newline) when ReadOptions.MaxLineBytes is zero. The longest line of the
// published traces is under 3 KiB (synthetic_trace.jsonl, 374 ids); 64 MiB
// admits prompts of millions of blocks while keeping a corrupt or hostile
// file (one line with no newline) from exhausting memory.
const DefaultMaxLineBytes = 64 << 20

// readBufferBytes is the size of the Reader's bufio buffer: large enough that
// every published line is returned by one ReadSlice without copying.
const readBufferBytes = 64 << 10

// ReadOptions controls how a Reader treats bad lines. The zero value reads
// strictly with the default line limit.
type ReadOptions struct {
	// Lenient skips bad lines, counting them by Kind (see Reader.Skipped),
	// instead of failing on the first one.
	Lenient bool
	// MaxLineBytes is the longest accepted line, without its newline;
	// 0 means DefaultMaxLineBytes. A longer line is a KindTooLong error and
	// is never held in memory whole.
	MaxLineBytes int
}

// Validate reports the first invalid field of o.
func (o ReadOptions) Validate() error {
	if o.MaxLineBytes < 0 {
		return fmt.Errorf("trace: ReadOptions.MaxLineBytes is %d, want >= 0", o.MaxLineBytes)
	}
	return nil
}

func (o ReadOptions) maxLine() int {
	if o.MaxLineBytes <= 0 {
		return DefaultMaxLineBytes
	}
	return o.MaxLineBytes
}

// Kind classifies why a trace line is bad.
type Kind uint8

// The kinds of bad lines, in the order Skipped reports them.
const (
	// KindSyntax: the line is not valid JSON.
	KindSyntax Kind = iota + 1
	// KindTooLong: the line exceeds ReadOptions.MaxLineBytes.
	KindTooLong
	// KindNotObject: the line is valid JSON but not an object.
	KindNotObject
	// KindMissingField: one of the four required fields is absent.
	KindMissingField
	// KindDuplicateField: a required field appears twice.
	KindDuplicateField
	// KindWrongType: a field has the wrong JSON type or range: a string or
	// float where an integer is needed, hash_ids not an array, a hash id
	// that is not a non-negative integer, an integer that overflows.
	KindWrongType
	// KindBadLength: input_length or output_length is zero or negative.
	KindBadLength
	// KindNegativeTimestamp: timestamp is negative.
	KindNegativeTimestamp
	// KindBlockCount: len(hash_ids) != ceil(input_length/BlockTokens).
	KindBlockCount
	// KindBackwards: the timestamp is smaller than that of the previous
	// good line.
	KindBackwards

	numKinds = int(KindBackwards) + 1
)

var kindNames = [numKinds]string{
	KindSyntax:            "invalid JSON",
	KindTooLong:           "line too long",
	KindNotObject:         "not an object",
	KindMissingField:      "missing field",
	KindDuplicateField:    "duplicate field",
	KindWrongType:         "wrong type",
	KindBadLength:         "non-positive length",
	KindNegativeTimestamp: "negative timestamp",
	KindBlockCount:        "hash_ids count mismatch",
	KindBackwards:         "timestamp goes backwards",
}

// String returns a short human name of k, such as "invalid JSON".
func (k Kind) String() string {
	if int(k) < numKinds && k > 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// LineError reports a bad trace line. Its Error is one line,
// "file:line: reason".
type LineError struct {
	// File is the name given to NewReader (a path for ReadFile).
	File string
	// Line is the 1-based line number.
	Line int
	// Kind classifies the problem.
	Kind Kind
	// Reason says what is wrong, e.g. `timestamp: want an integer, got a string`.
	Reason string
}

// Error returns "file:line: reason".
func (e *LineError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
}

// SkipCount is how many lines of one Kind a lenient Reader skipped.
type SkipCount struct {
	// Kind is the problem.
	Kind Kind
	// Count is the number of lines skipped for it.
	Count int
	// FirstLine is the line number of the first such line.
	FirstLine int
	// FirstReason is the full reason given for that first line.
	FirstReason string
}

// Skipped summarises the lines a lenient Reader skipped.
type Skipped struct {
	// Total is the number of skipped lines.
	Total int
	// ByKind lists the kinds with at least one skipped line, in Kind order.
	ByKind []SkipCount
}

// String returns "skipped K bad lines: reason: count (first at line L), ..."
// or "skipped 0 bad lines".
func (s Skipped) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "skipped %d bad lines", s.Total)
	for i, c := range s.ByKind {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d (first at line %d)", c.Kind, c.Count, c.FirstLine)
	}
	return b.String()
}

// Reader streams requests from a JSON Lines trace.
//
// Format rules (strict mode rejects, lenient mode skips and counts):
//   - each non-blank line is one JSON object with the integer fields
//     "timestamp" (ms, >= 0, non-decreasing from one good line to the next),
//     "input_length" (> 0), "output_length" (> 0) and "hash_ids" (array of
//     non-negative integers, exactly ceil(input_length/512) of them);
//   - a required field may not appear twice;
//   - extra fields are allowed and ignored (their values must be valid JSON);
//     the published files have exactly the four fields;
//   - blank lines (empty or only white space) are skipped silently but
//     counted in line numbers, so a trailing newline or blank line is fine;
//     a trailing "\r" (CRLF files) is ignored;
//   - a line longer than ReadOptions.MaxLineBytes is an error.
//
// A strict Reader's first error is sticky: every later Next returns it.
// I/O errors of the underlying reader are returned in both modes.
// A Reader is not safe for concurrent use.
type Reader struct {
	name    string
	br      *bufio.Reader
	opts    ReadOptions
	maxLine int
	line    int
	buf     []byte
	p       parser
	err     error

	havePrev bool
	prevTS   int64
	prevLine int

	skipped [numKinds]SkipCount
	nSkip   int
}

// NewReader returns a Reader of r; name is used in error messages.
// A negative opts.MaxLineBytes is treated as 0 (the default).
func NewReader(r io.Reader, name string, opts ReadOptions) *Reader {
	return &Reader{
		name:    name,
		br:      bufio.NewReaderSize(r, readBufferBytes),
		opts:    opts,
		maxLine: opts.maxLine(),
	}
}

// Name returns the name given to NewReader.
func (r *Reader) Name() string { return r.name }

// Line returns the number of the last line read (0 before the first).
func (r *Reader) Line() int { return r.line }

// Skipped returns the counts of bad lines skipped so far (lenient mode).
func (r *Reader) Skipped() Skipped {
	s := Skipped{Total: r.nSkip}
	for _, c := range r.skipped {
		if c.Count > 0 {
			s.ByKind = append(s.ByKind, c)
		}
	}
	return s
}

// Next returns the next request, or io.EOF after the last. A bad line gives
// a *LineError in strict mode; in lenient mode it is skipped and counted.
func (r *Reader) Next() (Request, error) {
	if r.err != nil {
		return Request{}, r.err
	}
	for {
		line, tooLong, err := r.readLine()
		if err != nil {
			if err != io.EOF {
				err = fmt.Errorf("trace: read %s after line %d: %w", r.name, r.line, err)
			}
			r.err = err
			return Request{}, err
		}
		var req Request
		var kind Kind
		var reason string
		if tooLong {
			kind, reason = KindTooLong, fmt.Sprintf("line longer than %d bytes", r.maxLine)
		} else {
			line = trimSpace(line)
			if len(line) == 0 {
				continue
			}
			req, kind, reason = r.p.parse(line)
			if kind == 0 {
				kind, reason = check(&req)
			}
			if kind == 0 && r.havePrev && req.Timestamp < r.prevTS {
				kind = KindBackwards
				reason = fmt.Sprintf("timestamp %d goes backwards (line %d has %d)", req.Timestamp, r.prevLine, r.prevTS)
			}
		}
		if kind != 0 {
			if r.opts.Lenient {
				r.skip(kind, reason)
				continue
			}
			r.err = &LineError{File: r.name, Line: r.line, Kind: kind, Reason: reason}
			return Request{}, r.err
		}
		r.havePrev, r.prevTS, r.prevLine = true, req.Timestamp, r.line
		return req, nil
	}
}

func (r *Reader) skip(k Kind, reason string) {
	c := &r.skipped[k]
	if c.Count == 0 {
		*c = SkipCount{Kind: k, FirstLine: r.line, FirstReason: reason}
	}
	c.Count++
	r.nSkip++
}

// readLine returns the next line without its newline, valid until the next
// call. A line longer than maxLine is consumed but not kept
// (tooLong == true). It returns io.EOF only when no bytes remain.
func (r *Reader) readLine() (line []byte, tooLong bool, err error) {
	if cap(r.buf) > 4*readBufferBytes {
		r.buf = nil // do not keep a huge buffer after one long line
	}
	r.buf = r.buf[:0]
	started := false
	for {
		frag, err := r.br.ReadSlice('\n')
		if err == nil && !started {
			// Fast path: the whole line is in the bufio buffer.
			r.line++
			line = frag[:len(frag)-1]
			if len(line) > r.maxLine {
				return nil, true, nil
			}
			return line, false, nil
		}
		if len(frag) > 0 {
			started = true
		}
		content := frag
		if err == nil {
			content = frag[:len(frag)-1]
		}
		if !tooLong {
			if len(r.buf)+len(content) > r.maxLine {
				tooLong = true
				r.buf = r.buf[:0]
			} else {
				r.buf = append(r.buf, content...)
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			if !started {
				return nil, false, io.EOF
			}
		default:
			return nil, false, err
		}
		r.line++
		if tooLong {
			return nil, true, nil
		}
		return r.buf, false, nil
	}
}

// trimSpace removes JSON white space (and a CR) from both ends of b.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// ReadFile reads a whole trace file (see Reader for the rules). In lenient
// mode bad lines are skipped silently; use a Reader to learn the counts.
func ReadFile(path string, opts ReadOptions) ([]Request, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: open trace: %w", err)
	}
	defer f.Close()
	return ReadAll(NewReader(f, path, opts))
}

// ReadAll reads the remaining requests of r.
func ReadAll(r *Reader) ([]Request, error) {
	var out []Request
	for {
		req, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, req)
	}
}

// Validate reports whether r obeys the per-line rules of the format:
// timestamp >= 0, input and output length > 0 and
// len(HashIDs) == Blocks(InputLength). (Ordering between requests is the
// caller's concern; the Reader and Writer check it.)
func (r *Request) Validate() error {
	if k, reason := check(r); k != 0 {
		return fmt.Errorf("trace: invalid request: %s", reason)
	}
	return nil
}

// check is Validate returning the Kind; kind 0 means valid.
func check(r *Request) (Kind, string) {
	switch {
	case r.Timestamp < 0:
		return KindNegativeTimestamp, fmt.Sprintf("timestamp %d is negative", r.Timestamp)
	case r.InputLength <= 0:
		return KindBadLength, fmt.Sprintf("input_length %d must be > 0", r.InputLength)
	case r.OutputLength <= 0:
		return KindBadLength, fmt.Sprintf("output_length %d must be > 0", r.OutputLength)
	case len(r.HashIDs) != Blocks(r.InputLength):
		return KindBlockCount, fmt.Sprintf("hash_ids has %d ids, want ceil(%d/%d) = %d",
			len(r.HashIDs), r.InputLength, BlockTokens, Blocks(r.InputLength))
	}
	return 0, ""
}
