package sim

// holderView is what the planner derives once from a request's holder
// lists (the holders of its leading blocks) so that planning it on one
// instance costs O(1) per block instead of a scan of the block's holders,
// and routing it over P instances costs O(1) for each instance that holds
// none of its blocks past its own RAM run (a plain instance; see plain).
// Building it visits every holder once: O(total holders), the size of the
// lists themselves. It is the planner's scratch, reused across requests,
// and not safe for concurrent use.
type holderView struct {
	hs [][]Holder

	// By instance, valid when stamp[i] == gen (the instance appears in
	// hs): run is the number of leading blocks it holds in RAM, last the
	// last block it holds in any tier, row the first word of its RAM and
	// SSD bit rows in bits (words words each).
	gen   uint32
	stamp []uint32
	run   []int32
	last  []int32
	row   []int32
	words int
	bits  []uint64

	// By block, valid when srcOK[j]: the holder a remote fetch of block j
	// reads from (remoteSource).
	srcOK []bool
	src   []Holder
}

// load builds the view of hs on a cluster of P instances. Holders outside
// [0, P) are sources only (they are no instance a plan is made for).
func (v *holderView) load(hs [][]Holder, P int) {
	v.hs = hs
	if len(v.stamp) != P {
		v.stamp = make([]uint32, P)
		v.run = make([]int32, P)
		v.last = make([]int32, P)
		v.row = make([]int32, P)
		v.gen = 0
	}
	v.gen++
	if v.gen == 0 { // wrapped: forget every stamp
		clear(v.stamp)
		v.gen = 1
	}
	v.words = (len(hs) + 63) / 64
	v.bits = v.bits[:0]
	v.srcOK = append(v.srcOK[:0], make([]bool, len(hs))...)
	v.src = append(v.src[:0], make([]Holder, len(hs))...)
	for j, h := range hs {
		for _, x := range h {
			i := int(x.Inst)
			if i < 0 || i >= P {
				continue
			}
			if v.stamp[i] != v.gen {
				v.stamp[i] = v.gen
				v.run[i] = 0
				v.row[i] = int32(len(v.bits))
				v.bits = append(v.bits, make([]uint64, 2*v.words)...)
			}
			if x.Tier == tierRAM && int(v.run[i]) == j {
				v.run[i]++
			}
			v.last[i] = int32(j)
			w := int(v.row[i]) + j/64
			if x.Tier != tierRAM {
				w += v.words
			}
			v.bits[w] |= 1 << (j % 64)
		}
	}
}

// tiers reports whether instance i holds block j in RAM and in SSD
// (whether hs[j] lists i with each tier).
func (v *holderView) tiers(i, j int) (ram, ssd bool) {
	if i < 0 || i >= len(v.stamp) || v.stamp[i] != v.gen {
		return false, false
	}
	w, b := int(v.row[i])+j/64, uint64(1)<<(j%64)
	return v.bits[w]&b != 0, v.bits[w+v.words]&b != 0
}

// plainRun reports whether instance i is plain, holding none of the
// blocks past its RAM run in any tier, and returns the run's length.
// The plans of a plain instance depend on i only through the run's
// length and the load of its ingress link, so routing evaluates it in
// O(1) (Planner.plainEst).
func (v *holderView) plainRun(i int) (run int, plain bool) {
	if v.stamp[i] != v.gen {
		return 0, true
	}
	return int(v.run[i]), v.last[i] < v.run[i]
}

// source returns the holder a remote fetch of block j reads from (see
// Planner.remoteSource), computed once per block and view: an instance
// fetches only blocks it holds in neither tier, so the choice is the
// same for every instance.
func (v *holderView) source(p *Planner, c Cluster, j int) Holder {
	if !v.srcOK[j] {
		v.src[j] = p.remoteSource(c, v.hs[j])
		v.srcOK[j] = true
	}
	return v.src[j]
}
