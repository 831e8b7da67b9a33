package main

import (
	"context"
	"io"
)

// runHitrate is a placeholder until its issue work lands; it is replaced, not kept.
func runHitrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return usageErrorf("hitrate: not built yet")
}
