package master

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutines; the tests' own must all be joined.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
