#!/bin/sh
# bench/vs.sh: kvpool's side-by-side comparison (issues 6, 15 and 19) in one
# run: node GET from RAM against redis-server GET and raw loopback TCP (one
# hot buffer, and the fair reference: the node's working set), node GET
# from SSD against raw O_DIRECT disk reads (sequential, and the fair
# reference: the node's I/O size at random slots, its queue depth) and
# against those reads served raw over loopback TCP (disk then tcp), at
# 32 KiB, 256 KiB, 1 MiB and 4 MiB with 8 connections; a batch GET (MGET)
# of 32 objects of 4 KiB from one node, 8 connections, and the same batch
# through the public client (master lookup included); the whole cluster (3
# nodes, 8 clients, batches of 8, verified) beside raw TCP over the same
# connections (kvpool bench --target cluster --vs tcp); at scale, the
# master's index with 1M, 50M and 1M keys (bytes per key, leased 32-key
# lookups) and the simulator on 1M requests over 1,000 instances, one core
# (bench/simscale.sh; together about 3 minutes and 4 GB of memory; set
# VS_SCALE=0 to leave them out, VS_INDEX_KEYS to change 50M); by chain id and then
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
# 19's goals, each met or not met, from this run: the data plane's ratios,
# the small-object batch, bytes per key and the 50M / 1M lookup ratio of
# the index, and the simulator's wall time.
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
if [ "${VS_SCALE:-1}" != 0 ]; then
	# At scale: the master's index with 1M keys, then VS_INDEX_KEYS (50M),
	# then 1M again (the ratio is against the two 1M runs' mean); the
	# simulator on a generated trace of 1M requests over 1,000 instances,
	# one core (bench/simscale.sh's grid point).
	echo "# the master index at 1M, ${VS_INDEX_KEYS:-50M}, 1M keys (leased 32-key lookups); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
	for k in 1M "${VS_INDEX_KEYS:-50M}" 1M; do
		"$bin" bench --target master-index --keys "$k" --batch 32 "$@" 2>/dev/null | tee -a "$out"
	done
	echo "# the simulator at fleet scale: 1,000 instances, 1M requests, global, cache-aware, one core"
	SIMSCALE_INSTANCES=1000 SIMSCALE_REQUESTS=1000000 sh bench/simscale.sh | tee -a "$out"
fi
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
# (≥ 0.9), and the small-object batch (≥ 256k objects/s); the whole
# cluster beside raw TCP (a figure, no goal); the index's bytes per key
# (≤ 64, built and after the lookups) and its lookups at 50M keys against the mean of the two 1M runs
# (≥ 0.67×, per wall second; per CPU second beside it); the simulator at
# 1M requests × 1,000 instances on one core (< 60 s).
echo "# issue 19 goals (this run; load average: $(cut -d' ' -f1-3 /proc/loadavg))"
awk '
/ tcp \(working set\) | disk \(node I\/O\) / && ($1 == "256KiB" || $1 == "1MiB") {
	ref = ($5 == "tcp") ? "tcp (working set)" : "disk (node I/O)"
	met = ($(NF-1) == "not") ? "not met" : $NF
	printf "%-6s %s / %s: ratio %s, goal >= %s: %s\n", $1, $2, ref, $(NF-2 - (met == "not met")), $(NF-1 - (met == "not met")), met
	n++
}
/ disk then tcp \(raw\) / && ($1 == "256KiB" || $1 == "1MiB") {
	printf "%-6s %s / disk then tcp (raw): ratio %s (no goal: the node I/O served raw over loopback, the bound when the disk outruns TCP)\n", $1, $2, $(NF-2)
}
$1 == "node-ram" && $2 == "4KiB" && $5 == 32 {
	met = ($8 >= 256000) ? "met" : "not met"
	printf "4KiB   node MGET of 32, 8 conns: %.0f objects/s, goal >= 256000: %s\n", $8, met
	n++
}
$2 == "cluster" && $5 == "cluster-tcp" {
	printf "%-6s cluster, 3 nodes, 8 clients, batches of 8: %s GB/s verified, raw TCP over the same connections %s GB/s: ratio %s (no goal)\n", $1, $3, $6, $8
}
$1 == "index" && $2 == "(master-index):" {
	keys = $3; kps = $(NF-7); cpu = substr($(NF-3), 2)
	if (keys == 1000000) { k1 += kps; c1 += cpu; n1++ }
	if (!(keys in bpkOf)) { order[++nk] = keys; bpkOf[keys] = $5; afterOf[keys] = substr($7, 2); kpsOf[keys] = kps; cpuOf[keys] = cpu }
}
$1 == 1000 && $2 == 1000000 && NF == 9 {
	met = ($3 < 60) ? "met" : "not met"
	printf "sim    1M requests on 1,000 instances, one core: %s s wall, %s MiB peak RSS, goal < 60 s: %s\n", $3, $5, met
}
END {
	if (n1 > 0) {
		for (i = 1; i <= nk; i++) {
			k = order[i]
			met = (bpkOf[k] <= 64 && afterOf[k] <= 64) ? "met" : "not met"
			printf "index  %d keys: %s bytes/key built, %s after the lookups, goal <= 64: %s\n", k, bpkOf[k], afterOf[k], met
			if (k == 1000000) continue
			r = kpsOf[k] / (k1 / n1); rc = cpuOf[k] / (c1 / n1)
			met = (r >= 0.67) ? "met" : "not met"
			printf "index  %d keys / 1M keys, lookups/s: ratio %.2f (per CPU second %.2f), goal >= 0.67: %s\n", k, r, rc, met
		}
	}
	if (n != 5) printf "(%d of the 5 data-plane goal rows found; a --block given to vs.sh may have left 256KiB or 1MiB out)\n", n
}
' "$out"
exit "$rc"
