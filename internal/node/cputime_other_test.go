//go:build !unix

package node

import "testing"

// reportCPU reports GB/s for b.N payloads of size bytes (the CPU time is
// read only on Unix).
func reportCPU(b *testing.B, size int, _, _ float64) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)*float64(size)/1e9/s, "GB/s")
	}
}

// cpuSeconds is 0 where the process's CPU time is not read.
func cpuSeconds(*testing.B) float64 { return 0 }
