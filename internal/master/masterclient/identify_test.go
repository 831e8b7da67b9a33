package masterclient

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/master/masterproto"
)

// TestIdentify: the first bytes of an answer tell a master from what else
// may answer at a wrong address; a master's answer whose length happens
// to start with a RESP byte is still a master's.
func TestIdentify(t *testing.T) {
	reply := func(msg string) []byte {
		r := masterproto.HelloReply{Code: masterproto.CodeUnauthorized, Message: msg}
		b, err := masterproto.AppendHelloReply(nil, 0, &r)
		if err != nil {
			t.Fatal(err)
		}
		return b[:masterproto.HeaderLen]
	}
	plus := reply("abc") // 43 bytes: its first byte is '+'
	if plus[0] != '+' {
		t.Fatalf("sample's first byte %q, want '+'", plus[0])
	}
	cl := attempt{addr: "127.0.0.1:1"}
	for _, tc := range []struct {
		name  string
		first []byte
		want  string // "" for a master
	}{
		{"master", reply(""), ""},
		{"master, length starting '+'", plus, ""},
		{"node", []byte("KVPL\x01\x00\x07\x00"), "kvpool node's data port"},
		{"http", []byte("HTTP/1.1 400 Bad Request\r\n"), "HTTP server"},
		{"redis error", []byte("-ERR unknown command\r\n"), "Redis server"},
		{"redis ok", []byte("+OK\r\n"), "Redis server"},
		{"other", []byte("SSH-2.0-OpenSSH_9.6\r\n"), `first bytes of its answer: "SSH-2.0-`},
	} {
		err := cl.identify(tc.first)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v; want a master", tc.name, err)
		case tc.want != "" && (err == nil || !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want ErrUnavailable saying %q", tc.name, err, tc.want)
		}
	}
}
