package main

import (
	"context"
	"io"
)

// runCompare is a placeholder until its issue work lands; it is replaced, not kept.
func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return usageErrorf("compare: not built yet")
}
