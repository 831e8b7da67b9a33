package main

import (
	"context"
	"io"
)

// runSim is a placeholder until its issue work lands; it is replaced, not kept.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return usageErrorf("sim: not built yet")
}
