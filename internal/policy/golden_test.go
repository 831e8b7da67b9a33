package policy_test

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/policy"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.txt with the current results")

// classic is the 20-reference string of the operating-systems textbooks
// (Silberschatz, Galvin and Gagne, "Operating System Concepts", ch. 9).
var classic = []policy.Key{7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1}

// TestClassicReferenceString pins the hand-derived hit/miss strings of the
// classic example with 3 frames: FIFO 15 faults, LRU 12, OPT 9 (the
// textbook numbers), and OPT with bypass 8 (it declines to load page 4 at
// reference 8, whose next use never comes, so reference 11 hits).
func TestClassicReferenceString(t *testing.T) {
	tests := []struct {
		name   string
		ev     policy.Eviction
		want   string
		faults int
	}{
		{"fifo", policy.NewFIFO(3), "MMMMHMMMMMMHHMMHHMMM", 15},
		{"lru", policy.NewLRU(3), "MMMMHMHMMMMHHMHMHMHH", 12},
		{"opt", policy.NewBelady(3, policy.BeladyOptions{NoBypass: true}), "MMMMHMHMHHMHHMHHHMHH", 9},
		{"belady", policy.NewBelady(3, policy.BeladyOptions{}), "MMMMHMHMHHHHHMHHHMHH", 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := hitString(policy.NewCache(3, tt.ev, nil), classic, nil)
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if n := strings.Count(got, "M"); n != tt.faults {
				t.Errorf("%d faults, want %d", n, tt.faults)
			}
		})
	}
}

// hitString runs seq through c (with true next uses) and returns one
// letter per access: H for a hit, M for a miss. When depth is not nil,
// depth[i] is seq[i]'s position in its request, and each access carries
// its chain hints (Depth, and Parent = the previous key of the request),
// as the hit-ratio engine and the simulator set them.
func hitString(c *policy.Cache, seq []policy.Key, depth []int) string {
	next := nextUses(seq)
	var b strings.Builder
	for i, k := range seq {
		a := policy.Access{Key: k, Time: int64(i), NextUse: next[i]}
		if depth != nil && depth[i] > 0 {
			a.Depth, a.Parent = depth[i], seq[i-1]
		}
		if c.Access(a) {
			b.WriteByte('H')
		} else {
			b.WriteByte('M')
		}
	}
	return b.String()
}

func nextUses(seq []policy.Key) []int64 {
	out := make([]int64, len(seq))
	last := make(map[policy.Key]int64)
	for i := len(seq) - 1; i >= 0; i-- {
		if j, ok := last[seq[i]]; ok {
			out[i] = j
		} else {
			out[i] = policy.NoNextUse
		}
		last[seq[i]] = int64(i)
	}
	return out
}

// golden is one testdata/golden file: comment lines, a capacity, a
// sequence, and the expected hit/miss string per spec. A sequence may mark
// request boundaries with "|": then every access carries its chain hints
// (depth is each key's position in its request; nil without marks).
type golden struct {
	comments []string
	capacity int
	seq      []policy.Key
	depth    []int
	want     map[string]string
}

func readGolden(path string) (golden, error) {
	g := golden{want: make(map[string]string)}
	data, err := os.ReadFile(path)
	if err != nil {
		return g, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			if strings.HasPrefix(line, "#") {
				g.comments = append(g.comments, line)
			}
			continue
		}
		field, value, ok := strings.Cut(line, ":")
		if !ok {
			return g, fmt.Errorf("%s:%d: want 'name: value', got %q", path, n, line)
		}
		field, value = strings.TrimSpace(field), strings.TrimSpace(value)
		switch field {
		case "capacity":
			if g.capacity, err = strconv.Atoi(value); err != nil {
				return g, fmt.Errorf("%s:%d: capacity: %w", path, n, err)
			}
		case "sequence":
			d := 0
			for _, f := range strings.Fields(value) {
				if f == "|" {
					if g.depth == nil {
						g.depth = make([]int, len(g.seq))
						for i := range g.depth {
							g.depth[i] = i // the keys before the first mark are one request
						}
					}
					d = 0
					continue
				}
				if g.depth != nil {
					g.depth = append(g.depth, d)
				}
				d++
				k, err := strconv.ParseUint(f, 10, 64)
				if err != nil {
					return g, fmt.Errorf("%s:%d: sequence: %w", path, n, err)
				}
				g.seq = append(g.seq, k)
			}
		default:
			g.want[field] = value
		}
	}
	return g, sc.Err()
}

func (g golden) write(path string, got map[string]string, specs []policy.Spec) error {
	var b bytes.Buffer
	for _, c := range g.comments {
		fmt.Fprintln(&b, c)
	}
	fmt.Fprintf(&b, "capacity: %d\n", g.capacity)
	var seq []string
	for i, k := range g.seq {
		if g.depth != nil && i > 0 && g.depth[i] == 0 {
			seq = append(seq, "|")
		}
		seq = append(seq, strconv.FormatUint(k, 10))
	}
	fmt.Fprintf(&b, "sequence: %s\n", strings.Join(seq, " "))
	for _, s := range specs {
		fmt.Fprintf(&b, "%s: %s\n", s, got[s.String()])
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// TestGolden replays every testdata/golden file through every preset spec
// and compares the hit/miss strings; -update rewrites the files.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden files in testdata/golden")
	}
	specs := policy.Presets()
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			g, err := readGolden(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(g.seq) == 0 {
				t.Fatalf("%s: empty sequence", path)
			}
			got := make(map[string]string)
			for _, s := range specs {
				c, err := s.NewCache(g.capacity)
				if err != nil {
					t.Fatal(err)
				}
				got[s.String()] = hitString(c, g.seq, g.depth)
			}
			if *update {
				if err := g.write(path, got, specs); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, s := range specs {
				want, ok := g.want[s.String()]
				if !ok {
					t.Errorf("%s: no line for %s (run go test -update)", path, s)
					continue
				}
				if got[s.String()] != want {
					t.Errorf("%s: %s\n got  %s\n want %s", path, s, got[s.String()], want)
				}
			}
		})
	}
}
