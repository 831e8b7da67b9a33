#!/bin/sh
# bench/vs.sh: kvpool's side-by-side comparison (issues 6, 15 and 19) in one
# run: node GET from RAM against redis-server GET and raw loopback TCP (one
# hot buffer, and the fair reference: the node's working set), node GET
# from SSD against raw O_DIRECT disk reads (sequential, and the fair
# reference: the node's I/O size at random slots, its queue depth), at
# 32 KiB, 256 KiB, 1 MiB and 4 MiB with 8 connections; a batch GET (MGET)
# of 32 objects of 4 KiB from one node, 8 connections, and the same batch
# through the public client (master lookup included); the whole cluster (3
# nodes, 8 clients, batches of 8, verified) beside raw TCP over the same
# connections (kvpool bench --target cluster --vs tcp); by chain id and then
# by name (LMCache-style names,
# the node's named ops, against TCP and redis); then master lookups
# (batches of 32) and the hit-ratio engine (LRU). Installs redis-server
# with apt-get when it is missing and this shell may (root); otherwise the
# redis column is skipped, and the command says so. It ends with
# bench/resp.sh: kvpool's Redis front against redis-server with
# redis-benchmark (issue 16's RESP rows; its RESP_* environment applies,
# the flags given here do not: redis-benchmark counts requests, not time).
#
# In each comparison table the "ratio" column is node GB/s / the point's
# GB/s; "goal" and "met" are set on the rows a goal applies to (redis:
# 1.0; tcp (working set) and disk (node I/O): 0.9 at 256 KiB and 1 MiB);
# the old references carry none. The script ends with a summary of issue
# 19's goals, each met or not met, from this run.
#
# Usage: bench/vs.sh [extra kvpool bench flags, e.g. --duration 10s --dir /ssd]
# (flags go to every run; a --block given here replaces the sizes below for
# the comparisons only).
set -eu
cd "$(dirname "$0")/.."

sizes=32KiB,256KiB,1MiB,4MiB

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

out=$(mktemp "${TMPDIR:-/tmp}/kvpool-vs.XXXXXX")
trap 'rm -f "$bin" "$out"' EXIT

echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average: $(cut -d' ' -f1-3 /proc/loadavg), $(git rev-parse --short HEAD 2>/dev/null || echo 'no git')"
"$bin" bench --vs redis,tcp,disk --block "$block" --conns 8 "$@" | tee "$out"
echo "# small objects: MGET of 32 × 4 KiB from one node, 8 connections; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin" bench --target node --block 4KiB --batch 32 --conns 8 "$@" | tee -a "$out"
echo "# the same batch through the public client (master lookup, lease, MGET), one node"
"$bin" bench --target cluster --nodes 1 --block 4KiB --batch 32 --conns 8 "$@"
echo "# the whole cluster: 3 nodes, 8 clients, client.Get of 8 blocks (lookup, MGETs, every block verified) beside raw TCP over the same 24 connections; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin" bench --target cluster --vs tcp --nodes 3 --block 256KiB,1MiB --batch 8 --conns 8 "$@" | tee -a "$out"
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
# resp.sh exits non-zero when one of its rows fails: the summary below
# still prints, and the script exits with resp.sh's status.
rc=0
sh bench/resp.sh || rc=$?

# Issue 19's goals, from the tables above: node GET from RAM / tcp (working
# set) and node GET from SSD / disk (node I/O) at 256 KiB and 1 MiB
# (≥ 0.9), and the small-object batch (≥ 256k objects/s); then the whole
# cluster beside raw TCP (a figure, no goal).
echo "# issue 19 goals (this run; load average: $(cut -d' ' -f1-3 /proc/loadavg))"
awk '
/ tcp \(working set\) | disk \(node I\/O\) / && ($1 == "256KiB" || $1 == "1MiB") {
	ref = ($5 == "tcp") ? "tcp (working set)" : "disk (node I/O)"
	met = ($(NF-1) == "not") ? "not met" : $NF
	printf "%-6s %s / %s: ratio %s, goal >= %s: %s\n", $1, $2, ref, $(NF-2 - (met == "not met")), $(NF-1 - (met == "not met")), met
	n++
}
$1 == "node-ram" && $2 == "4KiB" && $5 == 32 {
	met = ($8 >= 256000) ? "met" : "not met"
	printf "4KiB   node MGET of 32, 8 conns: %.0f objects/s, goal >= 256000: %s\n", $8, met
	n++
}
$2 == "cluster" && $5 == "cluster-tcp" {
	printf "%-6s cluster, 3 nodes, 8 clients, batches of 8: %s GB/s verified, raw TCP over the same connections %s GB/s: ratio %s (no goal)\n", $1, $3, $6, $8
}
END { if (n != 5) printf "(%d of the 5 goal rows found; a --block given to vs.sh may have left 256KiB or 1MiB out)\n", n }
' "$out"
exit "$rc"
