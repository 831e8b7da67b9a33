#!/bin/sh
# bench/vs.sh: kvpool's side-by-side comparison (issues 6 and 15) in one run:
# node GET from RAM against redis-server GET and raw loopback TCP, node GET
# from SSD against raw O_DIRECT disk reads, at 32 KiB, 256 KiB and 4 MiB
# with 8 connections, by chain id and then by name (LMCache-style names,
# the node's named ops, against TCP and redis); then master lookups
# (batches of 32) and the hit-ratio engine (LRU). Installs redis-server
# with apt-get when it is missing and this shell may (root); otherwise the
# redis column is skipped, and the command says so. It ends with
# bench/resp.sh: kvpool's Redis front against redis-server with
# redis-benchmark (issue 16's RESP rows; its RESP_* environment applies,
# the flags given here do not: redis-benchmark counts requests, not time).
#
# In each comparison table the rows "node-ram … tcp" and "node-ram … redis"
# (or node-ram-named) hold the ratios issue 15's speed targets are about:
# the "ratio" column is node GB/s / the point's GB/s.
#
# Usage: bench/vs.sh [extra kvpool bench flags, e.g. --duration 10s --dir /ssd]
# (flags go to every run; a --block given here replaces the sizes below for
# the comparisons only).
set -eu
cd "$(dirname "$0")/.."

sizes=32KiB,256KiB,4MiB

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

# A binary of its own, so that another tree's vs.sh run at the same time
# (the before/after runs of a change) does not replace it.
bin=$(mktemp "${TMPDIR:-/tmp}/kvpool-bench.XXXXXX")
trap 'rm -f "$bin"' EXIT
go build -o "$bin" ./cmd/kvpool

# The comparisons take --block from "$@" when given there; master and sim
# have no block size and get "$@" without it (the kept arguments are
# appended after the originals, which are then shifted off).
block=$sizes
n=$#
want=""
for a in "$@"; do
	if [ -n "$want" ]; then
		block=$a
		want=""
		continue
	fi
	case $a in
	--block | -block) want=1 ;;
	--block=* | -block=*) block=${a#*=} ;;
	*) set -- "$@" "$a" ;;
	esac
done
shift "$n"

echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average: $(cut -d' ' -f1-3 /proc/loadavg), $(git rev-parse --short HEAD 2>/dev/null || echo 'no git')"
"$bin" bench --vs redis,tcp,disk --block "$block" --conns 8 "$@"
echo "# named objects; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin" bench --vs redis,tcp --named --block "$block" --conns 8 "$@"
echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin" bench --target master --batch 32 "$@"
trace=../shared/traces/conversation_trace.jsonl
if [ -f "$trace" ]; then
	"$bin" bench --target sim --conns 1 --trace "$trace" "$@"
else
	"$bin" bench --target sim --conns 1 "$@"
fi
echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# the Redis front against redis-server (bench/resp.sh)"
sh bench/resp.sh
