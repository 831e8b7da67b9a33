package listen_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/listen"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		addr    string
		hasAuth bool
		noAuth  bool     // want an error wrapping ErrNoAuth
		bad     bool     // want another error (malformed address)
		want    []string // substrings of the error
	}{
		{addr: "127.0.0.1:7480"},
		{addr: "127.0.0.1:0"},
		{addr: "127.1.2.3:7480"},
		{addr: "[::1]:7480"},
		{addr: "[::ffff:127.0.0.1]:7480"},
		{addr: "localhost:7480"},
		{addr: "LocalHost:0"},
		{addr: "0.0.0.0:7480", noAuth: true, want: []string{"0.0.0.0:7480", "every interface", "--auth-token", "KVPOOL_AUTH_TOKEN", "127.0.0.1:7480"}},
		{addr: "0.0.0.0:0", noAuth: true, want: []string{"0.0.0.0:0", "127.0.0.1:0"}},
		{addr: ":7480", noAuth: true, want: []string{":7480", "every interface", "127.0.0.1:7480"}},
		{addr: "[::]:7480", noAuth: true, want: []string{"[::]:7480", "every interface"}},
		{addr: "10.1.2.3:7480", noAuth: true, want: []string{"10.1.2.3:7480", "not a loopback address"}},
		{addr: "[fe80::1%eth0]:7480", noAuth: true, want: []string{"fe80::1%eth0", "not a loopback address"}},
		{addr: "db.example.com:7480", noAuth: true, want: []string{"db.example.com:7480", "host"}},
		{addr: "0.0.0.0:7480", hasAuth: true},
		{addr: ":0", hasAuth: true},
		{addr: "10.1.2.3:7480", hasAuth: true},
		{addr: "db.example.com:7480", hasAuth: true},
		{addr: "127.0.0.1", bad: true, want: []string{`"127.0.0.1"`, "missing port"}},
		{addr: "", bad: true, want: []string{`""`}},
		{addr: "0.0.0.0", hasAuth: true, bad: true, want: []string{`"0.0.0.0"`}},
	}
	for _, c := range cases {
		t.Run(c.addr, func(t *testing.T) {
			err := listen.Check(c.addr, c.hasAuth)
			switch {
			case !c.noAuth && !c.bad:
				if err != nil {
					t.Fatalf("Check(%q, %v) = %v, want nil", c.addr, c.hasAuth, err)
				}
				return
			case err == nil:
				t.Fatalf("Check(%q, %v) = nil, want an error", c.addr, c.hasAuth)
			case errors.Is(err, listen.ErrNoAuth) != c.noAuth:
				t.Fatalf("Check(%q, %v) = %v; errors.Is(ErrNoAuth) = %v, want %v", c.addr, c.hasAuth, err, !c.noAuth, c.noAuth)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check(%q, %v) = %q, want it to mention %q", c.addr, c.hasAuth, err, w)
				}
			}
		})
	}
}
