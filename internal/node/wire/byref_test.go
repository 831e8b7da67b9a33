package wire

import (
	"io"
	"net"
)

// byRef assembles a block-carrying frame the way the node server sends one:
// the head (AppendBlockFrameHead) and the block headers in one buffer, the
// payloads referenced where they are, all written with one writev
// (net.Buffers). It is reusable and, once warm, does not allocate.
type byRef struct {
	head []byte
	bufs net.Buffers
	out  net.Buffers // WriteTo's cursor (a field, so writing allocates nothing)
}

// buffers returns the frame's pieces in order; they alias g and the
// payloads until the next call.
func (g *byRef) buffers(op Op, reqID uint64, blks []Block) (net.Buffers, error) {
	var total uint64
	for _, b := range blks {
		total += uint64(len(b.Payload))
	}
	if need := HeaderLen + countLen + len(blks)*BlockHeaderLen; cap(g.head) < need {
		g.head = make([]byte, 0, need) // the pieces alias head: it must not move
	}
	head, err := AppendBlockFrameHead(g.head[:0], op, reqID, len(blks), total)
	if err != nil {
		return nil, err
	}
	clear(g.bufs) // drop references to the previous frame's payloads
	g.bufs = g.bufs[:0]
	prev := 0
	for _, b := range blks {
		head = AppendBlockHeader(head, BlockHeader{ID: b.ID, Code: b.Code, Checksum: b.Checksum, Len: uint32(len(b.Payload))})
		g.bufs = append(g.bufs, head[prev:])
		if len(b.Payload) > 0 {
			g.bufs = append(g.bufs, b.Payload)
		}
		prev = len(head)
	}
	if prev < len(head) { // a batch with no blocks: header and count only
		g.bufs = append(g.bufs, head[prev:])
	}
	g.head = head
	return g.bufs, nil
}

// writeTo writes the frame to w (with writev on a TCP connection).
func (g *byRef) writeTo(w io.Writer, op Op, reqID uint64, blks []Block) (int64, error) {
	bufs, err := g.buffers(op, reqID, blks)
	if err != nil {
		return 0, err
	}
	g.out = bufs
	n, err := g.out.WriteTo(w)
	g.out = nil
	return n, err
}
