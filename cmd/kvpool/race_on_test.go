//go:build race

package main

// raceEnabled is true when the test binary runs under the race detector,
// which slows the live replayer enough to distort its TTFTs.
const raceEnabled = true
