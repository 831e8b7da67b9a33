// Package netnstest lets tests that need real network namespaces run
// where they can be made and say why they skip where they cannot.
package netnstest

import (
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
