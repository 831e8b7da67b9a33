package trace

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestWriterFormat(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	reqs := []Request{
		{Timestamp: 0, InputLength: 6758, OutputLength: 500, HashIDs: []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}},
		{Timestamp: 3000, InputLength: 1, OutputLength: 1, HashIDs: []uint64{18446744073709551615}},
	}
	for _, r := range reqs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := `{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}` + "\n" +
		`{"timestamp": 3000, "input_length": 1, "output_length": 1, "hash_ids": [18446744073709551615]}` + "\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
	if w.Count() != 2 {
		t.Fatalf("Count = %d, want 2", w.Count())
	}
	got, _, err := readAll(t, buf.String(), ReadOptions{})
	if err != nil || !reflect.DeepEqual(got, reqs) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
}

func TestWriterRefusesInvalid(t *testing.T) {
	ok := Request{Timestamp: 10, InputLength: 512, OutputLength: 1, HashIDs: []uint64{1}}
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"negative timestamp", Request{Timestamp: -1, InputLength: 512, OutputLength: 1, HashIDs: []uint64{1}}, "negative"},
		{"zero input", Request{Timestamp: 10, InputLength: 0, OutputLength: 1}, "input_length 0"},
		{"zero output", Request{Timestamp: 10, InputLength: 512, OutputLength: 0, HashIDs: []uint64{1}}, "output_length 0"},
		{"block count", Request{Timestamp: 10, InputLength: 513, OutputLength: 1, HashIDs: []uint64{1}}, "hash_ids has 1 ids"},
		{"backwards", Request{Timestamp: 9, InputLength: 512, OutputLength: 1, HashIDs: []uint64{1}}, "backwards"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := NewWriter(&buf)
			if err := w.Write(ok); err != nil {
				t.Fatal(err)
			}
			err := w.Write(tt.req)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "request 2") {
				t.Fatalf("err = %v, want one naming request 2 and %q", err, tt.want)
			}
			_ = w.Flush()
			if strings.Count(buf.String(), "\n") != 1 {
				t.Fatalf("invalid request was written: %q", buf.String())
			}
		})
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriterFlushError(t *testing.T) {
	w := NewWriter(failWriter{})
	if err := w.Write(Request{InputLength: 1, OutputLength: 1, HashIDs: []uint64{0}}); err != nil {
		t.Fatal(err) // buffered: no error yet
	}
	if err := w.Flush(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Flush err = %v, want disk full", err)
	}
}
