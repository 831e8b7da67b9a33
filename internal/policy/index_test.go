package policy

import "testing"

// TestKeyIndexMatchesMap drives keyIndex and a Go map with the same random
// puts, overwrites and deletes over clustered and spread keys, comparing
// every answer and checking the table's structure as it goes.
func TestKeyIndexMatchesMap(t *testing.T) {
	keyspaces := []struct {
		name string
		key  func(i uint64) Key
	}{
		{"dense", func(i uint64) Key { return i }},
		{"spread", func(i uint64) Key { return i * 0x9e3779b97f4a7c15 }},
		{"high bits", func(i uint64) Key { return i << 40 }},
		{"same low bits", func(i uint64) Key { return i<<32 | 7 }},
	}
	for _, ks := range keyspaces {
		t.Run(ks.name, func(t *testing.T) {
			var x keyIndex
			x.init(4) // small, so it must grow
			m := make(map[Key]int32)
			r := splitmix(1)
			for step := range 20000 {
				k := ks.key(r.next() % 300)
				switch r.next() % 3 {
				case 0, 1:
					id := int32(r.next() % 1000)
					x.put(k, id)
					m[k] = id
				default:
					_, want := m[k]
					if got := x.del(k); got != want {
						t.Fatalf("step %d: del(%d) = %v, want %v", step, k, got, want)
					}
					delete(m, k)
				}
				probe := ks.key(r.next() % 300)
				id, ok := x.get(probe)
				wid, wok := m[probe]
				if ok != wok || id != wid {
					t.Fatalf("step %d: get(%d) = %d, %v; want %d, %v", step, probe, id, ok, wid, wok)
				}
				if x.len() != len(m) {
					t.Fatalf("step %d: len %d, want %d", step, x.len(), len(m))
				}
				if step%500 == 0 {
					if err := x.check(); err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
				}
			}
			n := 0
			x.each(func(k Key, id int32) bool {
				if m[k] != id {
					t.Fatalf("each: %d → %d, map has %d", k, id, m[k])
				}
				n++
				return true
			})
			if n != len(m) {
				t.Fatalf("each visited %d keys, want %d", n, len(m))
			}
		})
	}
}

// TestKeyIndexNoAllocSteadyState: once sized, puts and deletes allocate
// nothing.
func TestKeyIndexNoAllocSteadyState(t *testing.T) {
	var x keyIndex
	x.init(1000)
	i := Key(0)
	allocs := testing.AllocsPerRun(1000, func() {
		x.put(i, 1)
		if i >= 500 {
			x.del(i - 500)
		}
		i++
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per put+delete", allocs)
	}
}
