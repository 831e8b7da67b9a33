package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"github.com/kvpool/kvpool/internal/tier/ssd"
	"github.com/kvpool/kvpool/internal/vfs"
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
	f       *os.File
	cleanup func() error
	notes   []string
}

func (t *diskTCPTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	ioSize := (spec.BlockSize + ssd.PageSize - 1) / ssd.PageSize * ssd.PageSize
	if ioSize%vfs.DirectIOAlign != 0 && !spec.BufferedIO {
		return nil, fmt.Errorf("block size %d is not a multiple of %d, as O_DIRECT needs (or ask for buffered I/O)", spec.BlockSize, vfs.DirectIOAlign)
	}
	dir, cleanup, err := workDir(spec, "disktcp")
	if err != nil {
		return nil, err
	}
	t.cleanup = cleanup
	chunks := max(1, int(spec.DataBytes/int64(ioSize)))
	path := filepath.Join(dir, "disk.dat")
	if err := writeDataFile(ctx, path, chunks, ioSize); err != nil {
		return nil, err
	}
	flag := os.O_RDONLY
	if !spec.BufferedIO {
		flag |= vfs.ODirect
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil && flag != os.O_RDONLY {
		t.notes = append(t.notes, fmt.Sprintf("O_DIRECT refused (%v): reads may come from the page cache", err))
		flag = os.O_RDONLY
		f, err = os.OpenFile(path, flag, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	t.f = f
	srv := diskTCPServer{f: f, chunks: int64(chunks), ioSize: ioSize, size: spec.BlockSize}
	ln, err := t.listen(srv.serve)
	if err != nil {
		return nil, err
	}
	ws := make([]Worker, spec.Conns)
	for i := range ws {
		c, err := t.dial(ctx, ln)
		if err != nil {
			return nil, err
		}
		ws[i] = &tcpWorker{c: c, buf: make([]byte, spec.BlockSize), mix: newMix(i, chunks, 0)}
	}
	return ws, nil
}

func (t *diskTCPTarget) Annotate(res *Result) {
	res.Notes = append(res.Notes, t.notes...)
	res.Notes = append(res.Notes, "each GET: an O_DIRECT read of the block's pages, then written to loopback TCP; no framing, no checksum")
}

func (t *diskTCPTarget) Close() error {
	errs := []error{t.rawServers.Close()}
	if t.f != nil {
		errs = append(errs, t.f.Close())
	}
	if t.cleanup != nil {
		errs = append(errs, t.cleanup())
	}
	return errors.Join(errs...)
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
