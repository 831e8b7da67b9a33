// Package netnstest lets tests that need real network namespaces run
// where they can be made and say why they skip where they cannot.
package netnstest

import (
	"fmt"
	"os"
	"testing"

	"github.com/kvpool/kvpool/internal/netns"
)

// Require skips t, saying why, when this machine cannot make network
// namespaces (netns.Available): not Linux, not root, no ip or tc. Under
// CI (CI set), which runs as root with iproute2 installed by .ci/run, it
// fails t instead, so that the tests cannot vanish unnoticed.
func Require(t testing.TB) {
	t.Helper()
	if err := netns.Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the network-namespace tests: %v", err)
		}
		t.Skipf("skipped: %v", err)
	}
}

// Main runs m and then fails the test binary if it left a network host
// it made (netns.Owned): call it from TestMain in every package whose
// tests make Nets, as os.Exit(netnstest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if left := netns.Owned(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left network hosts they made: %v (ip netns list)\n", left)
		if code == 0 {
			code = 1
		}
	}
	return code
}
