package netshare

import (
	"math"
	"slices"
	"strings"
	"testing"
)

type start struct {
	at    float64
	bytes float64
	links []int
	tag   int
}

type finish struct {
	tag int
	at  float64
}

// run starts the flows in order and drains the network, returning every
// completion with its time.
func run(t *testing.T, caps []float64, starts []start) []finish {
	t.Helper()
	n, err := New(caps)
	if err != nil {
		t.Fatal(err)
	}
	var out []finish
	var done []int
	record := func(at float64) {
		for _, tag := range done {
			out = append(out, finish{tag, at})
		}
		done = done[:0]
	}
	for _, s := range starts {
		// Drain completions before s.at one by one so each gets its time.
		for {
			next, ok := n.NextDone()
			if !ok || next > s.at {
				break
			}
			if done, err = n.Advance(next, done); err != nil {
				t.Fatal(err)
			}
			record(next)
		}
		if done, err = n.Start(s.at, s.bytes, s.links, s.tag, done); err != nil {
			t.Fatal(err)
		}
		record(s.at)
	}
	for {
		next, ok := n.NextDone()
		if !ok {
			break
		}
		if done, err = n.Advance(next, done); err != nil {
			t.Fatal(err)
		}
		record(next)
	}
	return out
}

func TestSharing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		caps   []float64
		starts []start
		want   []finish
	}{
		{
			name:   "one flow at full capacity",
			caps:   []float64{10, 10},
			starts: []start{{0, 100, []int{0, 1}, 1}},
			want:   []finish{{1, 10}},
		},
		{
			name:   "two flows into one link get half each",
			caps:   []float64{10, 10, 10},
			starts: []start{{0, 100, []int{0, 2}, 1}, {0, 100, []int{1, 2}, 2}},
			want:   []finish{{1, 20}, {2, 20}},
		},
		{
			name:   "second flow joins half way",
			caps:   []float64{10},
			starts: []start{{0, 100, []int{0}, 1}, {5, 100, []int{0}, 2}},
			// 1 has 50 left at t=5, then runs at 5 B/s: done at 15; 2 has
			// 50 left at t=15 and runs alone: done at 20.
			want: []finish{{1, 15}, {2, 20}},
		},
		{
			name: "rate is the smallest share along the path",
			// links: 0 = egress A, 1 = ingress X, 2 = ingress Y, 3 = egress B.
			caps: []float64{10, 10, 10, 10},
			starts: []start{
				{0, 50, []int{0, 1}, 1},  // A→X: min(10/2, 10/2) = 5
				{0, 100, []int{0, 2}, 2}, // A→Y: min(10/2, 10/1) = 5
				{0, 100, []int{3, 1}, 3}, // B→X: min(10/1, 10/2) = 5
			},
			// At t=10 flow 1 ends; 2 and 3 have 50 left and run alone at 10.
			want: []finish{{1, 10}, {2, 15}, {3, 15}},
		},
		{
			name:   "slow link bounds the flow",
			caps:   []float64{100, 4},
			starts: []start{{0, 8, []int{0, 1}, 7}},
			want:   []finish{{7, 2}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := run(t, tc.caps, tc.starts)
			if len(got) != len(tc.want) {
				t.Fatalf("completions %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i].tag != tc.want[i].tag || math.Abs(got[i].at-tc.want[i].at) > 1e-9 {
					t.Fatalf("completions %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestAdvancePastSeveralCompletions(t *testing.T) {
	n, err := New([]float64{10})
	if err != nil {
		t.Fatal(err)
	}
	var done []int
	for i, b := range []float64{10, 20, 30} {
		if done, err = n.Start(0, b, []int{0}, i, done); err != nil {
			t.Fatal(err)
		}
	}
	done, err = n.Advance(100, done)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(done, []int{0, 1, 2}) || n.Flows() != 0 || n.Now() != 100 {
		t.Fatalf("done %v, flows %d, now %g; want [0 1 2], 0, 100", done, n.Flows(), n.Now())
	}
	if _, ok := n.NextDone(); ok {
		t.Error("NextDone reports a flow on an empty network")
	}
}

func TestEstimateAndActive(t *testing.T) {
	n, err := New([]float64{10, 20})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := n.Estimate(100, []int{0, 1}); got != 10 {
		t.Errorf("estimate on idle links = %g, want 10", got)
	}
	if _, err := n.Start(0, 100, []int{0}, 1, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := n.Estimate(100, []int{0, 1}); got != 20 {
		t.Errorf("estimate next to one flow = %g, want 20", got)
	}
	if n.Active(0) != 1 || n.Active(1) != 0 || n.Active(9) != 0 || n.Capacity(1) != 20 || n.Capacity(-1) != 0 {
		t.Errorf("Active/Capacity wrong: %d %d %d %g", n.Active(0), n.Active(1), n.Active(9), n.Capacity(1))
	}
	if rem, ok := n.Remaining(1); !ok || rem != 100 {
		t.Errorf("Remaining(1) = %g, %v", rem, ok)
	}
	if _, err := n.Advance(4, nil); err != nil {
		t.Fatal(err)
	}
	if rem, _ := n.Remaining(1); math.Abs(rem-60) > 1e-9 {
		t.Errorf("Remaining(1) after 4 s = %g, want 60", rem)
	}
	if _, ok := n.Remaining(2); ok {
		t.Error("Remaining of an unknown flow reports ok")
	}
}

func TestErrors(t *testing.T) {
	if _, err := New([]float64{1, 0}); err == nil || !strings.Contains(err.Error(), "link 1") {
		t.Errorf("New with a zero capacity: %v", err)
	}
	if _, err := New([]float64{math.Inf(1)}); err == nil {
		t.Error("New with an infinite capacity: no error")
	}
	n, _ := New([]float64{1, 1})
	for _, tc := range []struct {
		name  string
		bytes float64
		links []int
		want  string
	}{
		{"zero bytes", 0, []int{0}, "size"},
		{"NaN bytes", math.NaN(), []int{0}, "size"},
		{"no links", 1, nil, "links"},
		{"too many links", 1, []int{0, 1, 0, 1, 0}, "links"},
		{"unknown link", 1, []int{2}, "outside"},
		{"repeated link", 1, []int{1, 1}, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := n.Start(0, tc.bytes, tc.links, 1, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start: %v, want an error about %q", err, tc.want)
			}
		})
	}
	if _, err := n.Estimate(1, []int{5}); err == nil {
		t.Error("Estimate on an unknown link: no error")
	}
	if _, err := n.Advance(3, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Advance(2, nil); err == nil {
		t.Error("Advance backwards: no error")
	}
	if _, err := n.Start(1, 1, []int{0}, 1, nil); err == nil {
		t.Error("Start in the past: no error")
	}
}
