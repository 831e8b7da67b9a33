package tracesample

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/trace"
)

// randomTrace returns n valid requests over ~n*100 ms whose first hash ids
// come from 20 families; later ids are unique.
func randomTrace(n int, seed uint64) []trace.Request {
	rng := rand.New(rand.NewPCG(seed, 2))
	next := uint64(1000)
	ts := int64(0)
	reqs := make([]trace.Request, n)
	for i := range reqs {
		ts += int64(rng.IntN(200))
		in := 1 + rng.IntN(4000)
		ids := make([]uint64, trace.Blocks(in))
		ids[0] = uint64(rng.IntN(20))
		for j := 1; j < len(ids); j++ {
			ids[j] = next
			next++
		}
		reqs[i] = trace.Request{Timestamp: ts, InputLength: in, OutputLength: 1 + rng.IntN(100), HashIDs: ids}
	}
	return reqs
}

// reread writes reqs with trace.Writer and reads them back strictly.
func reread(t *testing.T, reqs []trace.Request) []trace.Request {
	t.Helper()
	var buf bytes.Buffer
	w := trace.NewWriter(&buf)
	for _, r := range reqs {
		if err := w.Write(r); err != nil {
			t.Fatalf("sample is not a valid trace: %v", err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	back, err := trace.ReadAll(trace.NewReader(&buf, "sample", trace.ReadOptions{}))
	if err != nil {
		t.Fatalf("sample does not re-read strictly: %v", err)
	}
	return back
}

func TestSample(t *testing.T) {
	src := randomTrace(2000, 1)
	end := src[len(src)-1].Timestamp
	tests := []struct {
		name  string
		opts  Options
		check func(t *testing.T, got []trace.Request)
	}{
		{"zero options keep everything", Options{}, func(t *testing.T, got []trace.Request) {
			if !reflect.DeepEqual(got, src) {
				t.Fatal("zero Options changed the trace")
			}
		}},
		{"window bounds and shift", Options{FromMs: end / 4, ToMs: end / 2}, func(t *testing.T, got []trace.Request) {
			var want []trace.Request
			for _, r := range src {
				if r.Timestamp >= end/4 && r.Timestamp < end/2 {
					r.Timestamp -= end / 4
					want = append(want, r)
				}
			}
			if len(want) == 0 || !reflect.DeepEqual(got, want) {
				t.Fatalf("got %d requests, want the %d in [from, to) shifted by from", len(got), len(want))
			}
			for _, r := range got {
				if r.Timestamp < 0 || r.Timestamp >= end/2-end/4 {
					t.Fatalf("timestamp %d outside the shifted window", r.Timestamp)
				}
			}
		}},
		{"window without end", Options{FromMs: end - 1000}, func(t *testing.T, got []trace.Request) {
			if len(got) == 0 || got[len(got)-1].Timestamp != 1000 {
				t.Fatalf("last timestamp should be 1000 after the shift, got %+v", got[len(got)-1])
			}
		}},
		{"families kept whole", Options{Families: 0.5, Seed: 7}, func(t *testing.T, got []trace.Request) {
			kept := map[uint64]int{}
			for _, r := range got {
				kept[r.HashIDs[0]]++
			}
			all := map[uint64]int{}
			for _, r := range src {
				all[r.HashIDs[0]]++
			}
			if len(kept) == 0 || len(kept) == len(all) {
				t.Fatalf("kept %d of %d families; want some but not all", len(kept), len(all))
			}
			for f, n := range kept {
				if n != all[f] {
					t.Fatalf("family %d: kept %d of %d requests", f, n, all[f])
				}
			}
		}},
		{"first N", Options{First: 10}, func(t *testing.T, got []trace.Request) {
			if !reflect.DeepEqual(got, src[:10]) {
				t.Fatal("first 10 differ")
			}
		}},
		{"scale", Options{Scale: 0.5}, func(t *testing.T, got []trace.Request) {
			for i, r := range got {
				want := (src[i].Timestamp + 1) / 2 // round half up
				if src[i].Timestamp%2 == 0 {
					want = src[i].Timestamp / 2
				}
				if r.Timestamp != want {
					t.Fatalf("request %d: %d scaled by 0.5 = %d, want %d", i, src[i].Timestamp, r.Timestamp, want)
				}
			}
		}},
		{"combined", Options{FromMs: 1000, ToMs: end, Families: 0.3, Seed: 3, First: 50, Scale: 2}, func(t *testing.T, got []trace.Request) {
			if len(got) != 50 {
				t.Fatalf("got %d requests, want 50", len(got))
			}
			for _, r := range got {
				if !KeepFamily(3, r.HashIDs[0], 0.3) || r.Timestamp > 2*(end-1000) {
					t.Fatalf("request %+v violates the options", r)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Sample(src, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, got)
			if back := reread(t, got); len(got) > 0 && !reflect.DeepEqual(back, got) {
				t.Fatal("sample changed on re-read")
			}
			again, _ := Sample(src, tt.opts)
			if !reflect.DeepEqual(again, got) {
				t.Fatal("same options, different sample")
			}
		})
	}
}

func TestKeepFamily(t *testing.T) {
	// Deterministic, monotone in the fraction, roughly the right share and
	// different seeds choose differently.
	n, same := 0, 0
	for id := range uint64(10000) {
		if KeepFamily(1, id, 0.25) != KeepFamily(1, id, 0.25) {
			t.Fatal("not deterministic")
		}
		if KeepFamily(1, id, 0.25) && !KeepFamily(1, id, 0.5) {
			t.Fatal("raising the fraction dropped a family")
		}
		if KeepFamily(1, id, 0.25) {
			n++
			if KeepFamily(2, id, 0.25) {
				same++
			}
		}
		if KeepFamily(1, id, 0) || !KeepFamily(1, id, 1) {
			t.Fatal("fraction 0 must keep none and 1 all")
		}
	}
	if n < 2300 || n > 2700 {
		t.Fatalf("kept %d of 10000 at 0.25", n)
	}
	if same > n/2 {
		t.Fatalf("seeds 1 and 2 agree on %d of %d kept families", same, n)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tt := range []struct {
		opts  Options
		field string
	}{
		{Options{FromMs: -1}, "FromMs"},
		{Options{ToMs: -1}, "ToMs"},
		{Options{FromMs: 10, ToMs: 10}, "ToMs"},
		{Options{Families: 1.5}, "Families"},
		{Options{Families: -0.1}, "Families"},
		{Options{First: -1}, "First"},
		{Options{Scale: -1}, "Scale"},
	} {
		err := tt.opts.Validate()
		if e, _ := option.Innermost(err, func(string) (string, bool) { return "", true }); e == nil || e.Field != tt.field {
			t.Errorf("%+v: err = %v, want one naming %s", tt.opts, err, tt.field)
		}
		if _, err := Sample(nil, tt.opts); err == nil {
			t.Errorf("%+v: Sample accepted invalid options", tt.opts)
		}
	}
}

func TestScaleOverflow(t *testing.T) {
	src := []trace.Request{{Timestamp: 1 << 62, InputLength: 1, OutputLength: 1, HashIDs: []uint64{0}}}
	if _, err := Sample(src, Options{Scale: 4}); err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Fatalf("err = %v, want overflow", err)
	}
}

func TestCopyStopsReadingAfterWindow(t *testing.T) {
	var in bytes.Buffer
	w := trace.NewWriter(&in)
	for _, r := range randomTrace(100, 3) {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Flush()
	in.WriteString("garbage that must never be read\n")
	var out bytes.Buffer
	n, err := Copy(context.Background(), trace.NewWriter(&out), trace.NewReader(&in, "in", trace.ReadOptions{}), Options{First: 5})
	if err != nil || n != 5 || strings.Count(out.String(), "\n") != 5 {
		t.Fatalf("Copy = %d, %v; output %d lines", n, err, strings.Count(out.String(), "\n"))
	}
	// Without a limit the garbage is reached and reported with its line.
	in2 := bytes.NewBufferString(`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}` + "\nxx\n")
	_, err = Copy(context.Background(), trace.NewWriter(&out), trace.NewReader(in2, "in2", trace.ReadOptions{}), Options{})
	var le *trace.LineError
	if !errors.As(err, &le) || le.Line != 2 {
		t.Fatalf("err = %v, want a LineError at line 2", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Copy(ctx, trace.NewWriter(&out), trace.NewReader(&in, "in", trace.ReadOptions{}), Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: err = %v", err)
	}
}
