package cluster

import (
	"bytes"
	"sync"
)

// Output collects a cluster's process output (give it as Options.Stdout
// and Stderr) and can be read while the processes write to it: writes and
// reads are serialized by its lock. The zero value is an empty Output.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String returns everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
