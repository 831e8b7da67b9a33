package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// RESP (the Redis serialization protocol, version 2) as far as GET and SET
// need it: commands are arrays of bulk strings; replies are simple strings,
// errors, integers and bulk strings. See https://redis.io/docs/latest/develop/reference/protocol-spec/.

// maxBulk bounds a bulk reply's length: Redis's proto-max-bulk-len default
// is 512 MB.
const maxBulk = 512 << 20

// ErrRESP marks a reply that breaks the protocol.
var ErrRESP = errors.New("resp: protocol error")

// RedisError is an error reply from the server (a "-" line).
type RedisError string

func (e RedisError) Error() string { return "redis: " + string(e) }

// AppendGet appends the RESP encoding of GET key to b.
func AppendGet(b []byte, key string) []byte {
	b = append(b, "*2\r\n$3\r\nGET\r\n"...)
	return appendBulk(b, key)
}

// AppendSetHeader appends the RESP encoding of SET key followed by the
// header of a value of n bytes; the caller writes the value and then
// "\r\n" (so a large value is not copied).
func AppendSetHeader(b []byte, key string, n int) []byte {
	b = append(b, "*3\r\n$3\r\nSET\r\n"...)
	b = appendBulk(b, key)
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

func appendBulk(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// Reply is one decoded reply.
type Reply struct {
	// Kind is the reply's type byte: '+', ':' or '$'.
	Kind byte
	// Str is a simple string's text.
	Str string
	// Int is an integer reply's value, or a bulk string's length (-1 for
	// the null bulk string).
	Int int64
	// Bulk is a bulk string's bytes (nil for the null bulk string).
	Bulk []byte
}

// ReadReply reads one reply from r. A bulk string is read into dst when
// it fits its capacity (else into a new buffer). An error reply is
// returned as a RedisError; arrays and anything else are ErrRESP.
func ReadReply(r *bufio.Reader, dst []byte) (Reply, error) {
	line, err := readLine(r)
	if err != nil {
		return Reply{}, err
	}
	if len(line) == 0 {
		return Reply{}, fmt.Errorf("%w: empty reply line", ErrRESP)
	}
	switch kind, rest := line[0], line[1:]; kind {
	case '+':
		return Reply{Kind: kind, Str: string(rest)}, nil
	case '-':
		return Reply{}, RedisError(rest)
	case ':':
		n, err := strconv.ParseInt(string(rest), 10, 64)
		if err != nil {
			return Reply{}, fmt.Errorf("%w: integer reply %q: %v", ErrRESP, rest, err)
		}
		return Reply{Kind: kind, Int: n}, nil
	case '$':
		n, err := strconv.ParseInt(string(rest), 10, 64)
		if err != nil || n < -1 || n > maxBulk {
			return Reply{}, fmt.Errorf("%w: bulk length %q", ErrRESP, rest)
		}
		if n == -1 {
			return Reply{Kind: kind, Int: -1}, nil
		}
		if int64(cap(dst)) < n+2 {
			dst = make([]byte, n+2)
		}
		dst = dst[:n+2]
		if _, err := io.ReadFull(r, dst); err != nil {
			return Reply{}, fmt.Errorf("resp: read bulk of %d bytes: %w", n, err)
		}
		if dst[n] != '\r' || dst[n+1] != '\n' {
			return Reply{}, fmt.Errorf("%w: bulk of %d bytes not followed by CRLF", ErrRESP, n)
		}
		return Reply{Kind: kind, Int: n, Bulk: dst[:n]}, nil
	default:
		return Reply{}, fmt.Errorf("%w: unsupported reply type %q", ErrRESP, kind)
	}
}

// maxLine bounds a reply line (simple string, error, length): 64 KiB,
// far above anything GET or SET returns.
const maxLine = 64 << 10

// readLine reads a CRLF-terminated line without the CRLF.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("%w: reply line longer than %d bytes", ErrRESP, r.Size())
	}
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("resp: read reply: %w", err)
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: reply line %q not ended by CRLF", ErrRESP, line)
	}
	if len(line) > maxLine {
		return nil, fmt.Errorf("%w: reply line longer than %d bytes", ErrRESP, maxLine)
	}
	return line[:len(line)-2], nil
}
