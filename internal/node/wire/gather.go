package wire

import (
	"fmt"
	"io"
	"net"
)

// Gather assembles one block-carrying frame (PUT, MPUT, GET response, MGET
// response) whose payloads are sent by reference: the frame header, count
// and block headers go into one small buffer Gather owns, and the payloads
// stay where they are (RAM slots, a client's buffers). WriteTo sends the
// pieces with a single writev on a *net.TCPConn (net.Buffers). A Gather is
// reusable; in steady state it does not allocate.
//
//	g.Begin(wire.OpMGetResponse, reqID)
//	for _, b := range found {
//		g.Add(b)
//	}
//	_, err := g.WriteTo(conn)
//
// The first error (a wrong op, a block that cannot be encoded, a frame too
// large) is kept and returned by Buffers and WriteTo, so Add need not be
// checked. Payloads must not change until the frame has been written.
//
// A Gather is not safe for concurrent use.
type Gather struct {
	op    Op
	reqID uint64
	head  []byte      // frame header, count, block headers
	cuts  []int       // head offset after block i's header
	pay   [][]byte    // block i's payload
	bufs  net.Buffers // rebuilt by every Buffers call
	out   net.Buffers // WriteTo's cursor over bufs (a field, so writing allocates nothing)
	total uint64      // payload bytes
	err   error
}

// Begin starts a frame of op (OpPut, OpMPut, OpGetResponse or
// OpMGetResponse) answering or numbered reqID, discarding any previous one.
func (g *Gather) Begin(op Op, reqID uint64) {
	g.op, g.reqID, g.total, g.err = op, reqID, 0, nil
	clear(g.pay) // drop references to the previous frame's payloads
	g.head, g.cuts, g.pay = g.head[:0], g.cuts[:0], g.pay[:0]
	if s := op.shape(); s != shapeBlock && s != shapeBlocks {
		g.err = fmt.Errorf("wire: gather: %v does not carry blocks: %w", op, ErrUnknownOp)
		return
	}
	// Reserve the header (and count); Buffers fills them in.
	g.head = append(g.head, make([]byte, HeaderLen)...)
	if op.shape() == shapeBlocks {
		g.head = append(g.head, 0, 0, 0, 0)
	}
}

// Add appends block b to the frame. Its payload is referenced, not copied.
func (g *Gather) Add(b Block) {
	if g.err != nil {
		return
	}
	if err := checkBlock(g.op, len(g.cuts), b.ID, b.Code, b.Checksum, len(b.Payload)); err != nil {
		g.err = err
		return
	}
	g.head = AppendBlockHeader(g.head, BlockHeader{ID: b.ID, Code: b.Code, Checksum: b.Checksum, Len: uint32(len(b.Payload))})
	g.cuts = append(g.cuts, len(g.head))
	g.pay = append(g.pay, b.Payload)
	g.total += uint64(len(b.Payload))
}

// Buffers completes the frame and returns its pieces in order, or the first
// error. The slices alias g's buffer and the payloads; they are valid until
// the next call of Begin, Buffers or WriteTo. Writing them consumes the
// returned net.Buffers, not the frame: Buffers and WriteTo can be called
// again to send the same frame once more.
func (g *Gather) Buffers() (net.Buffers, error) {
	if g.err != nil {
		return nil, g.err
	}
	if g.head == nil {
		return nil, fmt.Errorf("wire: gather: Buffers called before Begin: %w", errMisuse)
	}
	// Fill in the header and count reserved by Begin.
	if _, err := AppendBlockFrameHead(g.head[:0], g.op, g.reqID, len(g.cuts), g.total); err != nil {
		return nil, err
	}
	g.bufs = g.bufs[:0]
	prev := 0
	for i, cut := range g.cuts {
		g.bufs = append(g.bufs, g.head[prev:cut])
		if len(g.pay[i]) > 0 {
			g.bufs = append(g.bufs, g.pay[i])
		}
		prev = cut
	}
	if prev < len(g.head) { // a batch with no blocks: header and count only
		g.bufs = append(g.bufs, g.head[prev:])
	}
	return g.bufs, nil
}

// Len returns the frame's total length in bytes so far.
func (g *Gather) Len() int { return len(g.head) + int(g.total) }

// WriteTo completes the frame and writes it to w (with writev when w is a
// *net.TCPConn or *net.UnixConn). It implements io.WriterTo.
func (g *Gather) WriteTo(w io.Writer) (int64, error) {
	bufs, err := g.Buffers()
	if err != nil {
		return 0, err
	}
	g.out = bufs
	n, err := g.out.WriteTo(w) // consumes g.out (and nils bufs' elements)
	g.out = nil
	if err != nil {
		return n, fmt.Errorf("wire: write %v (request %d, %d bytes): %w", g.op, g.reqID, g.Len(), err)
	}
	return n, nil
}
