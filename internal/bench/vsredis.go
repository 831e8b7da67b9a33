package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
)

// CompareWithRedis is Compare that first starts the redis-server binary
// bin (StartRedis) when o asks for VsRedis without a RedisAddr, and stops
// it afterwards. When bin is not installed the redis point is skipped,
// with a reason saying how to install it, and warn (nil: none) gets a line
// saying so; any other failure to start it is an error.
func CompareWithRedis(ctx context.Context, o CompareOptions, bin string, warn io.Writer) ([]Comparison, error) {
	if o.RedisAddr == "" && slices.Contains(o.Against, VsRedis) {
		srv, err := StartRedis(ctx, bin)
		var notFound *exec.Error
		switch {
		case errors.As(err, &notFound):
			o.RedisSkipReason = fmt.Sprintf("%s not installed (apt-get install -y redis-server, or bench/vs.sh)", bin)
			if warn != nil {
				fmt.Fprintf(warn, "kvpool bench: %v; skipping redis. Install it with `apt-get update && apt-get install -y redis-server` (or run bench/vs.sh), or pass --redis-addr.\n", err)
			}
		case err != nil:
			return nil, err
		default:
			defer srv.Close()
			o.RedisAddr = srv.Addr()
		}
	}
	return Compare(ctx, o)
}
