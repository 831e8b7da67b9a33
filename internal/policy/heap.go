package policy

import "fmt"

// prioHeap is an indexed binary min-heap of keys ordered by (prio, tie):
// the root is the key with the smallest prio, ties going to the smaller tie.
// Keys live in an arena slice with stable ids (freed ids are reused), the
// heap array holds ids, and each arena entry knows its heap position, so an
// update or a removal is O(log n) and touches the map only to find the id.
// It backs LFU-DA (prio = priority, tie = last access time) and Belady
// (prio = -next use, tie = last access time).
type prioHeap struct {
	nodes []hnode
	index keyIndex
	heap  []int32
	free  []int32
}

type hnode struct {
	key  Key
	prio int64
	tie  int64
	aux  int64 // policy-owned (LFU's reference count)
	pos  int32 // position in heap
}

func (h *prioHeap) init(hint int) {
	hint = max(hint, 0)
	h.nodes = make([]hnode, 0, hint)
	h.index.init(hint)
	h.heap = make([]int32, 0, hint)
}

func (h *prioHeap) len() int { return len(h.heap) }

func (h *prioHeap) lookup(k Key) (int32, bool) {
	return h.index.get(k)
}

// top returns the id at the root, or nilNode when the heap is empty.
func (h *prioHeap) top() int32 {
	if len(h.heap) == 0 {
		return nilNode
	}
	return h.heap[0]
}

// push adds the new key k and returns its id.
func (h *prioHeap) push(k Key, prio, tie, aux int64) int32 {
	var id int32
	if n := len(h.free); n > 0 {
		id = h.free[n-1]
		h.free = h.free[:n-1]
	} else {
		id = int32(len(h.nodes))
		h.nodes = append(h.nodes, hnode{})
	}
	pos := int32(len(h.heap))
	h.nodes[id] = hnode{key: k, prio: prio, tie: tie, aux: aux, pos: pos}
	h.heap = append(h.heap, id)
	h.index.put(k, id)
	h.up(pos)
	return id
}

// update changes id's order and restores the heap.
func (h *prioHeap) update(id int32, prio, tie int64) {
	n := &h.nodes[id]
	n.prio, n.tie = prio, tie
	if !h.down(n.pos) {
		h.up(n.pos)
	}
}

// del removes id.
func (h *prioHeap) del(id int32) {
	pos := h.nodes[id].pos
	last := int32(len(h.heap) - 1)
	if pos != last {
		h.swap(pos, last)
	}
	h.heap = h.heap[:last]
	if pos != last {
		if !h.down(pos) {
			h.up(pos)
		}
	}
	h.index.del(h.nodes[id].key)
	h.nodes[id] = hnode{pos: nilNode}
	h.free = append(h.free, id)
}

func (h *prioHeap) less(i, j int32) bool {
	a, b := &h.nodes[h.heap[i]], &h.nodes[h.heap[j]]
	if a.prio != b.prio {
		return a.prio < b.prio
	}
	return a.tie < b.tie
}

func (h *prioHeap) swap(i, j int32) {
	h.heap[i], h.heap[j] = h.heap[j], h.heap[i]
	h.nodes[h.heap[i]].pos = i
	h.nodes[h.heap[j]].pos = j
}

func (h *prioHeap) up(i int32) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down sifts i down and reports whether it moved.
func (h *prioHeap) down(i0 int32) bool {
	i, n := i0, int32(len(h.heap))
	for {
		l := 2*i + 1
		if l >= n || l < 0 {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}

// check verifies the heap order, the positions and the index.
func (h *prioHeap) check() error {
	if h.index.len() != len(h.heap) {
		return fmt.Errorf("index holds %d keys, heap %d", h.index.len(), len(h.heap))
	}
	if err := h.index.check(); err != nil {
		return err
	}
	for i, id := range h.heap {
		if id < 0 || int(id) >= len(h.nodes) {
			return fmt.Errorf("heap[%d] = node %d out of range", i, id)
		}
		n := h.nodes[id]
		if n.pos != int32(i) {
			return fmt.Errorf("node %d (key %d) at heap %d records position %d", id, n.key, i, n.pos)
		}
		if got, ok := h.index.get(n.key); !ok || got != id {
			return fmt.Errorf("key %d at node %d not indexed there", n.key, id)
		}
		if i > 0 && h.less(int32(i), int32((i-1)/2)) {
			return fmt.Errorf("heap order broken at %d (key %d)", i, n.key)
		}
	}
	if len(h.nodes) != len(h.heap)+len(h.free) {
		return fmt.Errorf("arena %d nodes, %d in heap + %d free", len(h.nodes), len(h.heap), len(h.free))
	}
	return nil
}
