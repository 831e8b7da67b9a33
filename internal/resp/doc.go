// Package resp reads Redis requests and writes Redis replies in RESP2, the
// protocol of redis-cli, redis-benchmark and every Redis client library,
// for a Redis-compatible server front. It only frames: it knows no
// commands.
//
// # What is Redis-exact
//
// Reader parses requests as Redis 7.0 does (processInputBuffer,
// processMultibulkBuffer and processInlineBuffer in its networking.c, and
// sdssplitargs in sds.c); every case below is pinned by a test:
//
//   - A request starting with '*' is a multibulk `*N\r\n` followed by N
//     bulk strings `$len\r\n<len bytes>\r\n`; anything else is an inline
//     command, one line split into words.
//   - Numbers are parsed as Redis's string2ll: at most 20 bytes, "0" or an
//     optional '-' and a digit 1-9 then digits, within int64 ("01", "+1",
//     "-0", " 1" and "" are not numbers).
//   - A count of zero or less (`*0`, `*-1`) is an empty command, skipped;
//     so are empty inline lines and lines of only blanks.
//   - Redis finds the end of a header line at its first CR and then takes
//     the next byte as the LF without looking at it; after a bulk string's
//     data it skips two bytes without looking at them. Reader does the
//     same, so "$3\r\nfooXY" is the argument "foo".
//   - Redis scans for that CR (and for an inline line's LF) with strchr, so
//     a NUL byte ends the scan: a line with a NUL before its end never
//     ends, and the request fails as too big once MaxInline bytes wait.
//     Reader does the same. Bulk data may hold any bytes.
//   - An inline line ends at LF; a CR before it is dropped. Words are split
//     as sdssplitargs splits them: blanks (space, \t, \n, \v, \f, \r)
//     separate words, but only space, \t, \n and \r end an unquoted one;
//     "double quotes" take the escapes \xHH, \n, \r, \t, \b, \a and \<any>;
//     'single quotes' take only \'; a closing quote must be followed by a
//     blank or the end of the line; an empty quoted word ("") is an
//     argument (Redis 7 keeps it).
//   - Errors carry Redis's exact text, the one a Redis server sends before
//     it closes the connection: "Protocol error: invalid multibulk length"
//     (a count that is not a number or is over MaxArgs), "Protocol error:
//     invalid bulk length" (not a number, negative, over MaxBulk),
//     "Protocol error: expected '$', got 'X'" (also for a nested array:
//     Redis does not nest requests, and neither does Reader, which has no
//     recursion), "Protocol error: too big mbulk count string" and "...too
//     big bulk count string" (a header line with no CR within MaxInline
//     bytes), "Protocol error: too big inline request" and "Protocol
//     error: unbalanced quotes in request". Checks come in Redis's order: a
//     header line must be whole before its first byte is looked at.
//
// # What is a kvpool bound
//
// Redis trusts a declared bulk length: it allocates the whole `$len` (up
// to proto-max-bulk-len, 512 MiB) before the data arrives, so a client can
// make it hold 512 MiB with a 20-byte message. Reader allocates at most
// 1 MiB ahead of the bytes received: a bulk string is read into a buffer
// first made up to 1 MiB (so a value that size is read with no copy), then
// grown geometrically as its data arrives, never past the declared length,
// so a connection holds about twice what its client sent of the command
// plus 1 MiB and the 64 KiB read buffer — charged to a Memory, when set,
// before it is allocated. Buffers over 1 MiB are
// dropped before the Reader waits for the next command, so an idle
// connection does not pin one (they are kept while pipelined commands are
// already buffered); Shrink drops every buffer of an idle Reader, which a
// server calls on connections idle for a while.
//
// A Reader counts what it holds for commands: the arena of argument bytes
// and ArgOverhead (32 bytes) per argument slot, so a command of 2^20 empty
// arguments counts its 32 MiB of slice headers. Given a Memory
// (SetMemory), it reserves what it holds beyond FreeHeld (64 KiB) before
// allocating it and releases it when it drops buffers: a server bounds
// all its connections together with it, before their buffers grow rather
// than after a command is whole.
//
// Limits adds MaxCommand, the most argument bytes of one command together
// (Redis has no such bound: its only cap is client-query-buffer-limit, 1
// GiB, on unparsed input). Without it, one command of 1,048,576 arguments
// of 512 MiB each would be legal. Over it, Reader answers Redis's "invalid
// bulk length", the error Redis gives for one argument too long.
//
// MaxArgs defaults to 1,048,576, Redis's multibulk bound up to 6.2; Redis
// 7.0 accepts up to 2^31-1 arguments, which kvpool does not need.
//
// Limits also apply to inline commands (at their defaults they cannot be
// reached there, since a 64 KiB line holds at most 32,768 words), so
// every command Reader returns is within every limit; an inline command
// over one is refused as "too big inline request". MaxInline bounds header
// lines as well as inline lines, as Redis's PROTO_INLINE_MAX_SIZE does.
//
// Redis 7's limits for unauthenticated clients (at most 10 arguments of
// 16 KiB before AUTH) are the server's to apply: Reader does not know
// whether a connection is authenticated.
//
// # Replies
//
// Writer writes the RESP2 replies (simple strings, errors, integers, bulk
// strings, nulls and array headers) into a buffer it flushes when asked,
// or by itself when the buffer passes 64 KiB. BulkSegments writes a value
// held in pieces without copying its large pieces: they go out with
// net.Buffers, one writev system call on a TCP connection.
package resp
