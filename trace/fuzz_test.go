package trace

import (
	"bytes"
	"io"
	"reflect"
	"testing"
)

// FuzzReader feeds arbitrary bytes to the Reader. The seed corpus in
// testdata/fuzz/FuzzReader has a good file and one file per kind of bad
// line. Properties: no panic; every accepted request obeys the format rules
// and timestamps never go backwards; the strict reader's requests are a
// prefix of the lenient reader's; and what the Writer writes of the
// accepted requests reads back identically.
func FuzzReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := ReadOptions{MaxLineBytes: 4096}
		strict, strictErr := collect(NewReader(bytes.NewReader(data), "fuzz", opts))
		opts.Lenient = true
		lenient, lenientErr := collect(NewReader(bytes.NewReader(data), "fuzz", opts))
		if lenientErr != nil {
			t.Fatalf("lenient reader failed on an in-memory input: %v", lenientErr)
		}
		if strictErr == nil && len(strict) != len(lenient) {
			t.Fatalf("strict read everything but differs from lenient")
		}
		if len(strict) > len(lenient) || (len(strict) > 0 && !reflect.DeepEqual(strict, lenient[:len(strict)])) {
			t.Fatalf("strict requests are not a prefix of lenient requests")
		}
		for i := range lenient {
			if err := lenient[i].Validate(); err != nil {
				t.Fatalf("accepted request %d is invalid: %v", i, err)
			}
			if i > 0 && lenient[i].Timestamp < lenient[i-1].Timestamp {
				t.Fatalf("accepted request %d goes backwards", i)
			}
		}
		var buf bytes.Buffer
		w := NewWriter(&buf)
		for _, r := range lenient {
			if err := w.Write(r); err != nil {
				t.Fatalf("Writer refused an accepted request: %v", err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		again, err := collect(NewReader(&buf, "rewritten", ReadOptions{}))
		if err != nil {
			t.Fatalf("re-reading written requests: %v", err)
		}
		if len(lenient) == 0 && len(again) == 0 {
			return
		}
		if !reflect.DeepEqual(again, lenient) {
			t.Fatalf("round trip differs:\n got %+v\nwant %+v", again, lenient)
		}
	})
}

func collect(r *Reader) ([]Request, error) {
	var out []Request
	for {
		req, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, req)
	}
}
