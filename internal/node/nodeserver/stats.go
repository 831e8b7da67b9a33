package nodeserver

import (
	"sync/atomic"

	"github.com/kvpool/kvpool/internal/node/wire"
	"github.com/kvpool/kvpool/internal/server"
)

// Sizes of Stats.Requests.
const (
	// OpSlots indexes Stats.Requests by op: the request ops 0x01 (GET) to
	// 0x0E (SYNC) and 0x10 (ACCESS) at their own value, slot 0 for any
	// frame that is not a request (unknown ops, responses).
	OpSlots = int(wire.OpAccess) + 1
	// CodeSlots indexes Stats.Requests by status code: codes 0
	// (ok) to 11 (quota) at their own value, the last slot for any other.
	CodeSlots = int(wire.CodeQuota) + 2
)

// Stats is a snapshot of a server's counters.
type Stats struct {
	// ConnsOpen is the number of connections being served now.
	ConnsOpen int64
	// ConnsTotal counts accepted connections, refused ones included.
	ConnsTotal uint64
	// ConnsRefused counts connections refused because MaxConns were open.
	ConnsRefused uint64
	// HandshakesRefused counts hellos answered with a refusal (bad magic
	// or version, bad tenant, bad token, tenant policy).
	HandshakesRefused uint64
	// Requests counts requests by op and outcome: the code of the ERROR
	// frame answering it, or CodeOK when it got its response (a batch's
	// per-key statuses are not counted here; a SYNC is counted with the
	// code of its status, which is the whole request's). Use RequestCount.
	Requests [OpSlots][CodeSlots]uint64
	// BytesIn and BytesOut count every byte read from and written to
	// connections (handshakes, headers and payloads).
	BytesIn, BytesOut uint64
	// BlocksIn counts PUT/MPUT payloads received; BlocksOut counts
	// GET/MGET payloads sent.
	BlocksIn, BlocksOut uint64
	// WritevBytes, SendfileBytes and CopiedBytes count payload bytes sent
	// by each path: from memory with writev, from a file with sendfile,
	// and from a file through a buffer (no sendfile on the platform or for
	// the file).
	WritevBytes, SendfileBytes, CopiedBytes uint64
	// DecodeErrors counts frames that failed to decode (answered with
	// ERROR, or closing the connection).
	DecodeErrors uint64
	// Timeouts counts connections closed by a deadline (idle, handshake,
	// frame read or write).
	Timeouts uint64
	// Panics counts panics recovered while serving a connection: each one
	// is a bug, logged with its stack.
	Panics uint64
}

// RequestCount returns the number of requests of op answered with code.
func (s Stats) RequestCount(op wire.Op, c wire.Code) uint64 {
	return s.Requests[opSlot(op)][codeSlot(c)]
}

func opSlot(op wire.Op) int {
	if op.IsRequest() {
		return int(op)
	}
	return 0
}

func codeSlot(c wire.Code) int {
	if int(c) < CodeSlots-1 {
		return int(c)
	}
	return CodeSlots - 1
}

// counters are a server's live counters.
type counters struct {
	handshakesRef                           atomic.Uint64
	requests                                [OpSlots][CodeSlots]atomic.Uint64
	bytesIn, bytesOut, blocksIn, blocksOut  atomic.Uint64
	writevBytes, sendfileBytes, copiedBytes atomic.Uint64
	decodeErrors, timeouts, panics          atomic.Uint64
}

func (c *counters) request(op wire.Op, code wire.Code) {
	c.requests[opSlot(op)][codeSlot(code)].Add(1)
}

// snapshot returns the counters with the skeleton's connection counters.
func (c *counters) snapshot(conns server.Stats) Stats {
	s := Stats{
		ConnsOpen:         conns.Open,
		ConnsTotal:        conns.Accepted,
		ConnsRefused:      conns.Refused,
		HandshakesRefused: c.handshakesRef.Load(),
		BytesIn:           c.bytesIn.Load(),
		BytesOut:          c.bytesOut.Load(),
		BlocksIn:          c.blocksIn.Load(),
		BlocksOut:         c.blocksOut.Load(),
		WritevBytes:       c.writevBytes.Load(),
		SendfileBytes:     c.sendfileBytes.Load(),
		CopiedBytes:       c.copiedBytes.Load(),
		DecodeErrors:      c.decodeErrors.Load(),
		Timeouts:          c.timeouts.Load(),
		Panics:            c.panics.Load(),
	}
	for i := range c.requests {
		for j := range c.requests[i] {
			s.Requests[i][j] = c.requests[i][j].Load()
		}
	}
	return s
}
