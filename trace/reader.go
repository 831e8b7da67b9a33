package trace

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// ReadOptions controls how a Reader treats bad lines.
type ReadOptions struct {
	// Lenient skips bad lines (counting them by reason) instead of failing.
	Lenient bool
}

// Reader streams requests from a JSON Lines trace.
// TEMPORARY minimal version: the strict reader replaces it.
type Reader struct {
	name string
	sc   *bufio.Scanner
	line int
	opts ReadOptions
}

// NewReader returns a Reader of r; name is used in error messages.
func NewReader(r io.Reader, name string, opts ReadOptions) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	return &Reader{name: name, sc: sc, opts: opts}
}

// Next returns the next request, or io.EOF after the last.
func (r *Reader) Next() (Request, error) {
	for r.sc.Scan() {
		r.line++
		var req Request
		if err := json.Unmarshal(r.sc.Bytes(), &req); err != nil {
			return Request{}, fmt.Errorf("%s:%d: %v", r.name, r.line, err)
		}
		return req, nil
	}
	if err := r.sc.Err(); err != nil {
		return Request{}, err
	}
	return Request{}, io.EOF
}

// ReadFile reads a whole trace file.
func ReadFile(path string, opts ReadOptions) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rd := NewReader(f, path, opts)
	var out []Request
	for {
		req, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, req)
	}
}
