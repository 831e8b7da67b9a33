package respserver_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: every
// connection goroutine must end with its Serve.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
