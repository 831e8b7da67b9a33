// Package frame is the framing layer both kvpool protocols share: the node
// (data-plane) protocol in internal/node/wire and the master
// (control-plane) protocol in internal/master/masterproto.
//
// Every frame of both starts with the same 16-byte little-endian header:
//
//	offset size field
//	0      4    length: the whole frame, header included
//	4      1    op: a request has bit 7 clear; its response is op|0x80;
//	            0xFF is the ERROR frame
//	5      1    flags: zero in version 1
//	6      2    reserved: zero
//	8      8    request ID: chosen by the client, echoed by the response
//
// The package holds that header (Header, ParseHeader, AppendHeader, Begin
// and Finish), the Reader that reads frames off a stream without ever
// allocating ahead of the bytes received, the bounds and helpers of the
// limits, the handshake's magic-and-version prefix and the client's reading
// of a handshake reply (HelloErr), and the errors: the protocol-only
// sentinels (ErrBadRequest, ErrUnknownOp, ErrVersion, ErrInternal and the
// decode errors, each unwrapping to the meaning it is sent as) and
// RemoteError, a failure the peer reported with a status code.
//
// Each protocol keeps its own ops, bodies and status-code numbers (the two
// tables predate this package and are part of the wire formats); a Table
// maps a protocol's numbers to one error vocabulary, the sentinels of
// package kvpool and of this package, so errors.Is(err,
// kvpool.ErrUnavailable) holds whether a node or the master reported it.
package frame
