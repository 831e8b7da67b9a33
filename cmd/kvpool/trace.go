package main

import (
	"context"
	"io"
)

// runTrace is a placeholder until its issue work lands; it is replaced, not kept.
func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return usageErrorf("trace: not built yet")
}
