package frame

import (
	"bytes"
	"testing"
	"time"
)

// TestAppendFullLimitBelowNeed: a limit below len(dst)+n (a caller's bug)
// must not spin forever once dst is full: the n bytes are still read.
func TestAppendFullLimitBelowNeed(t *testing.T) {
	r := NewReader[op](bytes.NewReader(make([]byte, 10)), "test")
	done := make(chan []byte, 1)
	go func() {
		got, _ := r.AppendFull(make([]byte, 0, 4), 10, 4)
		done <- got
	}()
	select {
	case got := <-done:
		if len(got) != 10 {
			t.Fatalf("AppendFull read %d bytes, want 10", len(got))
		}
	case <-time.After(time.Minute): // a hang, not a speed bound
		t.Fatal("AppendFull with a limit below what it must read spins")
	}
}
