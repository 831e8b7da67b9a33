#!/bin/sh
# bench/vs.sh: kvpool's side-by-side comparison (issue 6) in one run:
# node GET from RAM against redis-server GET and raw loopback TCP, node GET
# from SSD against raw O_DIRECT disk reads, at 256 KiB and 1 MiB with 8
# connections; then master lookups (batches of 32) and the hit-ratio
# engine (LRU). Installs redis-server with apt-get when it is missing and
# this shell may (root); otherwise the redis column is skipped, and the
# command says so.
#
# Usage: bench/vs.sh [extra kvpool bench flags, e.g. --duration 10s --dir /ssd]
set -eu
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "bench/vs.sh: installing redis-server with apt-get" >&2
		if ! { apt-get update && apt-get install -y redis-server; } >&2; then
			echo "bench/vs.sh: apt-get install redis-server failed; the redis column will be skipped" >&2
		fi
	else
		echo "bench/vs.sh: redis-server missing and cannot install it (needs root and apt-get); the redis column will be skipped" >&2
	fi
fi

go build -o /tmp/kvpool-bench ./cmd/kvpool
echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
/tmp/kvpool-bench bench --vs redis,tcp,disk --block 256KiB,1MiB --conns 8 "$@"
echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg)"
/tmp/kvpool-bench bench --target master --batch 32 "$@"
trace=../shared/traces/conversation_trace.jsonl
if [ -f "$trace" ]; then
	/tmp/kvpool-bench bench --target sim --conns 1 --trace "$trace" "$@"
else
	/tmp/kvpool-bench bench --target sim --conns 1 "$@"
fi
echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg)"
