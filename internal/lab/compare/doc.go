// Package compare runs kvpool's standard comparison matrix in model time and
// turns it into a report: the order-only hit ratio of every policy against
// capacity with the Belady ceiling (the paper's Fig 9), local against global
// caching on ten instances (Fig 10), average TTFT by scheduler (Fig 5), TTFT
// distributions per arm, average TTFT against network bandwidth with the
// recompute line (Fig 13), and goodput per arm.
//
// Every experiment is a pure function of the traces and the options, so a
// report is reproducible bit for bit; experiments run in parallel on a
// bounded pool of workers and report progress as they finish.
package compare
