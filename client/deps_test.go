package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps checks that the public client links only what its users need:
// not the master's state machine, not the cache policies, not Prometheus.
// It reads the import graph from the go command.
func TestDeps(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		// go test puts its own go command first on the PATH.
		t.Fatalf("the go command is not on PATH (%v): cannot list the client's dependencies", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	// A dependency is forbidden if it is one of these paths or, for a path
	// ending in "/", lies under it. The master's protocol and its client
	// (internal/master/masterproto, masterclient) are what the client
	// speaks, so only the state-machine package itself is listed.
	forbidden := []struct{ path, why string }{
		{"github.com/kvpool/kvpool/internal/master", "the master's state machine"},
		{"github.com/kvpool/kvpool/internal/policy", "the cache policies"},
		{"github.com/kvpool/kvpool/internal/policy/", "the cache policies"},
		{"github.com/prometheus/", "Prometheus"},
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f.path || strings.HasSuffix(f.path, "/") && strings.HasPrefix(dep, f.path) {
				t.Errorf("the client links %s (%s)", dep, f.why)
			}
		}
	}
}
