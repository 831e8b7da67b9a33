package wire_test

import (
	"bytes"
	"fmt"
	"log"
	"net"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// Example shows one exchange: the handshake, an MGET, and a response sent
// by reference (its payloads stay where they are; one writev sends them) and read straight into the client's buffers. A
// bytes.Buffer stands in for each direction of the TCP connection.
func Example() {
	var toServer, toClient bytes.Buffer
	const tenant = "acme"

	// Client: hello, then MGET of three keys.
	out, err := wire.AppendHello(nil, &wire.Hello{Tenant: tenant, Token: []byte("secret")})
	if err != nil {
		log.Fatal(err)
	}
	out, err = wire.AppendMGet(out, 1, []uint64{10, 11, 12})
	if err != nil {
		log.Fatal(err)
	}
	toServer.Write(out)

	// Server: read the hello, accept, read the request, answer from "RAM".
	ram := map[uint64][]byte{10: []byte("kv of block 10"), 12: []byte("kv of block 12")}
	sr, err := wire.NewReader(&toServer, wire.Limits{})
	if err != nil {
		log.Fatal(err)
	}
	var hello wire.Hello
	herr := sr.ReadHello(&hello)
	ack := wire.HelloAckFor(herr, sr.Limits())
	toClient.Write(wire.AppendHelloAck(nil, &ack))
	h, err := sr.ReadHeader()
	if err != nil {
		log.Fatal(err)
	}
	ids, err := sr.ReadIDs(nil)
	if err != nil {
		log.Fatal(err)
	}
	var total uint64
	for _, id := range ids {
		total += uint64(len(ram[id]))
	}
	head, err := wire.AppendBlockFrameHead(nil, h.Op.Response(), h.ReqID, len(ids), total)
	if err != nil {
		log.Fatal(err)
	}
	bufs := net.Buffers{head}
	for _, id := range ids {
		p, ok := ram[id]
		bh := wire.BlockHeader{ID: id, Code: wire.CodeNotFound}
		if ok {
			// The key is namespaced by the connection's tenant, never the request's.
			bh = wire.BlockHeader{ID: id, Checksum: block.Checksum(block.Key{Tenant: hello.Tenant, ID: id}, p), Len: uint32(len(p))}
		}
		bufs = append(bufs, wire.AppendBlockHeader(nil, bh), p)
	}
	if _, err := bufs.WriteTo(&toClient); err != nil { // writev on a TCP connection
		log.Fatal(err)
	}

	// Client: check the ack, then land each payload in its destination.
	cr, err := wire.NewReader(&toClient, wire.Limits{})
	if err != nil {
		log.Fatal(err)
	}
	var a wire.HelloAck
	if err := cr.ReadHelloAck(&a); err != nil || a.Err() != nil {
		log.Fatal(err, a.Err())
	}
	if _, err := cr.ReadHeader(); err != nil {
		log.Fatal(err)
	}
	n, err := cr.BeginBlocks()
	if err != nil {
		log.Fatal(err)
	}
	dst := make([]byte, 0, 64)
	for range n {
		bh, err := cr.NextBlock()
		if err != nil {
			log.Fatal(err)
		}
		if bh.Code != wire.CodeOK {
			fmt.Printf("%d: %v\n", bh.ID, wire.ErrorFor(bh.Code))
			continue
		}
		p, err := cr.ReadPayload(dst)
		if err != nil {
			log.Fatal(err)
		}
		ok := block.Verify(block.Key{Tenant: tenant, ID: bh.ID}, p, bh.Checksum)
		fmt.Printf("%d: %q verified=%v\n", bh.ID, p, ok)
	}
	// Output:
	// 10: "kv of block 10" verified=true
	// 11: block not found
	// 12: "kv of block 12" verified=true
}
