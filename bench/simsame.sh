#!/bin/sh
# bench/simsame.sh: checks that a change to the simulator leaves its
# results alone. It runs kvpool sim with two binaries (built from the
# trees before and after the change) on the published traces, every mode
# (recompute, local, global) × every routing (rr, least-loaded,
# cache-aware, joint), plus a few runs that reach the other code paths
# (an SSD tier, no prefetch, rejection, hot replication with redundant
# replicas first, an oracle policy), and compares the text summary, the
# JSON summary (every float in full) and the per-request records byte for
# byte. It prints one line per run and exits 1 at the first difference,
# showing it.
#
# Usage: bench/simsame.sh OLD_KVPOOL NEW_KVPOOL [TRACE_DIR]
# (TRACE_DIR defaults to $KVPOOL_TRACE_DIR, then ../shared/traces).
set -eu
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
	echo "usage: bench/simsame.sh OLD_KVPOOL NEW_KVPOOL [TRACE_DIR]" >&2
	exit 2
fi
old=$1
new=$2
dir=${3:-${KVPOOL_TRACE_DIR:-$(dirname "$0")/../../shared/traces}}
for b in "$old" "$new"; do
	if [ ! -x "$b" ]; then
		echo "bench/simsame.sh: $b is not an executable kvpool binary" >&2
		exit 2
	fi
done
if [ ! -d "$dir" ]; then
	echo "bench/simsame.sh: trace directory $dir not found (give TRACE_DIR or set KVPOOL_TRACE_DIR)" >&2
	exit 2
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/simsame.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# run NAME ARGS...: one configuration with both binaries, compared.
runs=0
run() {
	name=$1
	shift
	for side in old new; do
		if [ $side = old ]; then bin=$old; else bin=$new; fi
		"$bin" sim --trace-dir "$dir" "$@" --records "$tmp/$side.csv" >"$tmp/$side.txt"
		"$bin" sim --trace-dir "$dir" "$@" --json >"$tmp/$side.json"
		# The text names the records file; the path differs by side.
		sed "s|$tmp/$side.csv|RECORDS|" "$tmp/$side.txt" >"$tmp/$side.t"
	done
	for f in t json csv; do
		if ! cmp -s "$tmp/old.$f" "$tmp/new.$f"; then
			echo "DIFF $name ($f): $*"
			diff "$tmp/old.$f" "$tmp/new.$f" | head -20
			exit 1
		fi
	done
	runs=$((runs + 1))
	echo "same $name"
}

for tr in conversation_trace.jsonl synthetic_trace.jsonl; do
	for mode in recompute local global; do
		for routing in rr least-loaded cache-aware joint; do
			run "$tr $mode $routing" --trace "$tr" --mode "$mode" --routing "$routing"
		done
	done
	run "$tr global cache-aware ssd" --trace "$tr" --ssd-blocks 20000 --ram-blocks 2000
	run "$tr global cache-aware no-prefetch" --trace "$tr" --prefetch=false --rate 2
	run "$tr global cache-aware reject" --trace "$tr" --reject --rate 3
	run "$tr global joint hot+red" --trace "$tr" --routing joint --replication hot --evict-redundant-first --ram-blocks 2000 --ssd-blocks 8000
	run "$tr local cache-aware oracle" --trace "$tr" --mode local --policy belady --ram-blocks 2000 --ssd-blocks 4000
done
echo "bench/simsame.sh: $runs runs, all the same"
