//go:build unix

package node

import (
	"syscall"
	"testing"
)

// reportCPU reports GB/s and the process's CPU seconds per GB between cpu0
// and cpu1 (cpuSeconds readings), for b.N payloads of size bytes.
func reportCPU(b *testing.B, size int, cpu0, cpu1 float64) {
	gb := float64(b.N) * float64(size) / 1e9
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(gb/s, "GB/s")
	}
	b.ReportMetric((cpu1-cpu0)/gb, "cpu-s/GB")
}

// cpuSeconds returns the process's user + system CPU time so far.
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
