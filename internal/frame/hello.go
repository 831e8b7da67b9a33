package frame

import (
	"errors"
	"fmt"
	"io"
)

// MagicLen is the length of a protocol's magic, which starts its hello and
// hello reply ("KVPL" for the node protocol, "KVPM" for the master's); the
// protocol version (u16) follows it. The two never change between
// versions, so two versions can always tell each other apart.
const MagicLen = 4

// AppendMagic appends a handshake's magic and version.
func AppendMagic(dst []byte, magic string, version uint16) []byte {
	dst = append(dst, magic...)
	return le.AppendUint16(dst, version)
}

// CheckMagic reports whether b starts with magic, as an error wrapping
// ErrBadMagic when it does not. b must hold at least MagicLen bytes.
func CheckMagic(b []byte, magic string) error {
	if string(b[:MagicLen]) != magic {
		return fmt.Errorf("magic %q, want %q: %w", b[:MagicLen], magic, ErrBadMagic)
	}
	return nil
}

// ReadMagic reads a handshake's magic into p[:MagicLen] (a stream that
// ends before its first byte is a bare io.EOF) and checks it. Errors are
// not sticky; they do not name the protocol.
func (r *Reader[O]) ReadMagic(p []byte, magic string) error {
	p = p[:MagicLen]
	n, err := io.ReadFull(r.br, p)
	r.off += int64(n)
	switch {
	case n == 0 && err == io.EOF:
		return io.EOF
	case err != nil:
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("magic: got %d of %d bytes: %w", n, MagicLen, err)
	}
	return CheckMagic(p, magic)
}

// HelloErr is how a client reads a hello reply: nil when the server
// accepted (code ok) in the client's version; a *RemoteError when it
// refused, its message saying both versions when the code is mismatch;
// and an error wrapping ErrVersion when the server accepted a version the
// client does not speak. what names the reply in that error
// ("wire: hello-ack").
func HelloErr[C Code](code, ok, mismatch C, server, client uint16, msg, what string) error {
	switch {
	case code != ok:
		if code == mismatch {
			msg = fmt.Sprintf("server speaks protocol version %d, client %d: %s", server, client, msg)
		}
		return &RemoteError[C]{Code: code, Message: msg}
	case server != client:
		return fmt.Errorf("%s: server accepted protocol version %d, client speaks %d: %w", what, server, client, ErrVersion)
	}
	return nil
}
