package trace

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
)

// Writer writes requests in the format of the published trace files, one
// per line, byte for byte as they are written there:
//
//	{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}
//
// It refuses requests that the strict Reader would reject (see
// Request.Validate; timestamps must not go backwards), so whatever it writes
// reads back identically. Output is buffered: call Flush at the end.
// A Writer is not safe for concurrent use.
type Writer struct {
	w       *bufio.Writer
	buf     []byte
	n       int
	prevTS  int64
	started bool
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 64<<10)}
}

// Write writes one request as a line.
func (w *Writer) Write(r Request) error {
	if k, reason := check(&r); k != 0 {
		return fmt.Errorf("trace: write request %d: %s", w.n+1, reason)
	}
	if w.started && r.Timestamp < w.prevTS {
		return fmt.Errorf("trace: write request %d: timestamp %d goes backwards (previous %d)", w.n+1, r.Timestamp, w.prevTS)
	}
	w.buf = AppendLine(w.buf[:0], r)
	if _, err := w.w.Write(w.buf); err != nil {
		return fmt.Errorf("trace: write request %d: %w", w.n+1, err)
	}
	w.n++
	w.started, w.prevTS = true, r.Timestamp
	return nil
}

// Count returns the number of requests written.
func (w *Writer) Count() int { return w.n }

// Flush writes any buffered data to the underlying writer.
func (w *Writer) Flush() error {
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("trace: flush after %d requests: %w", w.n, err)
	}
	return nil
}

// AppendLine appends r in the published line format, with its newline, to
// b. It does not validate r.
func AppendLine(b []byte, r Request) []byte {
	b = append(b, `{"timestamp": `...)
	b = strconv.AppendInt(b, r.Timestamp, 10)
	b = append(b, `, "input_length": `...)
	b = strconv.AppendInt(b, int64(r.InputLength), 10)
	b = append(b, `, "output_length": `...)
	b = strconv.AppendInt(b, int64(r.OutputLength), 10)
	b = append(b, `, "hash_ids": [`...)
	for i, id := range r.HashIDs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendUint(b, id, 10)
	}
	return append(b, "]}\n"...)
}
