package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"

	"github.com/kvpool/kvpool/internal/tier/ssd"
)

// diskTCPTarget is the physical bound of a node GET from SSD on this
// machine (target disk-tcp, "disk then tcp (raw)"): the disk-node
// target's file and reads, behind a minimal loopback server that answers
// each 8-byte request (a block index, drawn at random like the node
// target's ids) by reading that block's whole pages with O_DIRECT into an
// aligned buffer and then writing its BlockSize bytes to the socket, as a
// node GET from SSD reads its record and then sends it, with no framing,
// no index and no checksum. When disk (node I/O) exceeds tcp (working
// set) in a run, this row, not the disk's, is what a network GET from SSD
// can reach; it is printed beside the others without a goal.
type diskTCPTarget struct {
	rawServers
	dataFile
}

func (t *diskTCPTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	ioSize := (spec.BlockSize + ssd.PageSize - 1) / ssd.PageSize * ssd.PageSize
	if err := t.open(ctx, spec, "disktcp", ioSize); err != nil {
		return nil, err
	}
	srv := diskTCPServer{f: t.f, chunks: int64(t.chunks), ioSize: ioSize, size: spec.BlockSize}
	ln, err := t.listen(srv.serve)
	if err != nil {
		return nil, err
	}
	return t.tcpWorkers(ctx, ln, spec, t.chunks)
}

func (t *diskTCPTarget) Annotate(res *Result) {
	t.dataFile.Annotate(res)
	res.Notes = append(res.Notes, "each GET: an O_DIRECT read of the block's pages, then written to loopback TCP; no framing, no checksum")
}

func (t *diskTCPTarget) Close() error {
	return errors.Join(t.rawServers.Close(), t.dataFile.Close())
}

// diskTCPServer answers requests from the file's blocks.
type diskTCPServer struct {
	f      *os.File
	chunks int64
	ioSize int // a block's whole pages
	size   int // bytes sent per block
}

// serve answers each request read from c until c fails or names no block.
func (s diskTCPServer) serve(c net.Conn) {
	buf := alignedBuf(s.ioSize)
	var req [tcpRequestLen]byte
	for {
		if _, err := io.ReadFull(c, req[:]); err != nil {
			return
		}
		i := binary.LittleEndian.Uint64(req[:])
		if i >= uint64(s.chunks) {
			return // the worker sees the connection end: its request failed
		}
		if _, err := s.f.ReadAt(buf, int64(i)*int64(s.ioSize)); err != nil {
			return
		}
		if _, err := c.Write(buf[:s.size]); err != nil {
			return
		}
	}
}
