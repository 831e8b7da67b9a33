package masterserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterclient"
)

// TestOversizedTokenIsRefusedNotReset: a client whose token is longer
// than the master's hello allows (64 KiB against the 4 KiB default) sends
// its whole HELLO at once; the master refuses it as too large, and the
// client reads that refusal rather than a reset connection.
func TestOversizedTokenIsRefusedNotReset(t *testing.T) {
	ts := start(t, newMaster(t, master.Options{}), Options{Token: []byte("tok")}, nil)
	token := make([]byte, 64<<10-1)
	for i := range token {
		token[i] = 'a'
	}
	for range 20 { // a reset depends on timing: try several times
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		mc, err := masterclient.Dial(ctx, ts.addr, masterclient.Options{Token: token})
		if err == nil {
			_, err = mc.Nodes(ctx)
			mc.Close()
		}
		cancel()
		if !errors.Is(err, kvpool.ErrTooLarge) {
			t.Fatalf("HELLO with a 64 KiB token: %v, want kvpool.ErrTooLarge (the master's refusal)", err)
		}
	}
}
