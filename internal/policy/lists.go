package policy

import "fmt"

// lists is a small arena of intrusive, circular, doubly-linked key lists
// sharing one index: the building block of the queue-based policies (LRU,
// FIFO, S3-FIFO, ARC, second-hit). Nodes live in one slice and link by
// int32 index, so steady-state operation allocates nothing: a removed node
// goes on a free list and the next push reuses it.
//
// Nodes 0..nlists-1 are the sentinels of the lists; a list's front is its
// sentinel's next, its back the sentinel's prev. A key is in at most one
// list at a time.
type lists struct {
	nodes []lnode
	index keyIndex
	lens  []int
	free  int32 // head of the free-node chain (through next), or nilNode
}

// lnode is one arena slot. list and aux are policy-owned tags: list is the
// index of the list the node is on, aux a small counter (S3-FIFO's
// frequency).
type lnode struct {
	key        Key
	prev, next int32
	list       uint8
	aux        uint8
}

// nilNode marks "no node".
const nilNode int32 = -1

// init prepares n empty lists; hint sizes the arena and index for that many
// keys so a cache that never exceeds it never grows them.
func (l *lists) init(n, hint int) {
	hint = max(hint, 0)
	l.nodes = make([]lnode, n, n+hint)
	for i := range n {
		l.nodes[i] = lnode{prev: int32(i), next: int32(i), list: uint8(i)}
	}
	l.index.init(hint)
	l.lens = make([]int, n)
	l.free = nilNode
}

// lookup returns the node of k.
func (l *lists) lookup(k Key) (int32, bool) {
	return l.index.get(k)
}

// len returns the length of list li.
func (l *lists) len(li uint8) int { return l.lens[li] }

// back returns the last node of list li, or nilNode when it is empty.
func (l *lists) back(li uint8) int32 {
	if l.lens[li] == 0 {
		return nilNode
	}
	return l.nodes[li].prev
}

// front returns the first node of list li, or nilNode when it is empty.
func (l *lists) front(li uint8) int32 {
	if l.lens[li] == 0 {
		return nilNode
	}
	return l.nodes[li].next
}

// pushFront adds the new key k at the front of list li and returns its node.
// k must not be in the index.
func (l *lists) pushFront(li uint8, k Key) int32 {
	var id int32
	if l.free != nilNode {
		id = l.free
		l.free = l.nodes[id].next
		l.nodes[id] = lnode{key: k}
	} else {
		id = int32(len(l.nodes))
		l.nodes = append(l.nodes, lnode{key: k})
	}
	l.index.put(k, id)
	l.link(id, li)
	return id
}

// moveToFront moves node id (on any list) to the front of list li.
func (l *lists) moveToFront(id int32, li uint8) {
	n := &l.nodes[id]
	if n.list == li && l.nodes[li].next == id {
		return
	}
	l.unlink(id)
	l.link(id, li)
}

// del removes node id from its list and the index and frees it.
func (l *lists) del(id int32) {
	l.unlink(id)
	l.index.del(l.nodes[id].key)
	l.nodes[id] = lnode{next: l.free}
	l.free = id
}

func (l *lists) link(id int32, li uint8) {
	head := int32(li)
	first := l.nodes[head].next
	n := &l.nodes[id]
	n.prev, n.next, n.list = head, first, li
	l.nodes[first].prev = id
	l.nodes[head].next = id
	l.lens[li]++
}

func (l *lists) unlink(id int32) {
	n := &l.nodes[id]
	l.nodes[n.prev].next = n.next
	l.nodes[n.next].prev = n.prev
	l.lens[n.list]--
}

// check verifies the arena: every list is a consistent ring of the length
// it claims, every listed node is indexed under its key, and the index
// holds nothing else.
func (l *lists) check() error {
	seen := 0
	for li := range l.lens {
		n, prev := 0, int32(li)
		for id := l.nodes[li].next; id != int32(li); id = l.nodes[id].next {
			nd := l.nodes[id]
			if id < int32(len(l.lens)) || int(id) >= len(l.nodes) {
				return fmt.Errorf("list %d: node %d out of range", li, id)
			}
			if nd.prev != prev {
				return fmt.Errorf("list %d: node %d has prev %d, want %d", li, id, nd.prev, prev)
			}
			if int(nd.list) != li {
				return fmt.Errorf("list %d: node %d tagged with list %d", li, id, nd.list)
			}
			if got, ok := l.index.get(nd.key); !ok || got != id {
				return fmt.Errorf("list %d: key %d at node %d not indexed there", li, nd.key, id)
			}
			prev = id
			n++
			if n > len(l.nodes) {
				return fmt.Errorf("list %d: cycle without sentinel", li)
			}
		}
		if l.nodes[li].prev != prev {
			return fmt.Errorf("list %d: sentinel prev %d, want %d", li, l.nodes[li].prev, prev)
		}
		if n != l.lens[li] {
			return fmt.Errorf("list %d: holds %d nodes, length says %d", li, n, l.lens[li])
		}
		seen += n
	}
	if seen != l.index.len() {
		return fmt.Errorf("index holds %d keys, lists hold %d", l.index.len(), seen)
	}
	return l.index.check()
}
