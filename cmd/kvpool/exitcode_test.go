package main

import (
	"errors"
	"fmt"
	"os/exec"
	"testing"

	"github.com/kvpool/kvpool/internal/lab/validate"
)

// TestExitCode checks the exit status of a command's error: 2 for a
// usage error, a verdict's own code, and 1 for any other failure, even
// one that wraps a child process's exit status (a node that exited 3
// after SIGTERM is not an INCONCLUSIVE verdict).
func TestExitCode(t *testing.T) {
	child := exec.Command("sh", "-c", "exit 3").Run()
	var ee *exec.ExitError
	if !errors.As(child, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("child error %v, want exit status 3", child)
	}
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"none", nil, 0},
		{"usage", usageErrorf("--x: bad"), 2},
		{"fail", errors.New("demo: disagree"), 1},
		{"inconclusive", exitError{err: errors.New("inconclusive"), code: validate.ExitInconclusive}, 3},
		{"wrapped verdict", fmt.Errorf("demo: %w", exitError{err: errors.New("x"), code: validate.ExitInconclusive}), 3},
		{"child's exit status", fmt.Errorf("validate: stop the cluster: cluster: node-0 exited after SIGTERM: %w", child), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exitCode(tt.err); got != tt.want {
				t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}
