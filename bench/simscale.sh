#!/bin/sh
# bench/simscale.sh: the cluster simulator at fleet scale (issue 19, part
# 5): wall time, CPU time and peak memory of one `kvpool sim --mode global
# --routing cache-aware` over a grid of cluster sizes × trace lengths, one
# core each.
#
# Each trace is generated with `kvpool trace gen` (the chat preset, seed 0)
# into a temporary directory that is removed at the end. Its arrival rate
# grows with the cluster: SIMSCALE_RATE requests/s per instance, by
# default 0.34, the preset's 3.4 req/s (the published conversation
# trace's rate) over the default 10 instances. Every cluster size then
# carries the same load per instance, so the cost per request measures
# the cluster's size, not a longer queue or a fuller cache.
#
# Each run is pinned to one core (taskset -c SIMSCALE_CPU, GOMAXPROCS=1)
# and measured with GNU time: wall s, CPU s (user + system), max RSS. The
# table adds requests/s and µs/request (wall), the token hit ratio the run
# printed, and the 1-minute load average before the run: the machine is
# shared, so read the times against it.
#
# Usage: bench/simscale.sh [extra kvpool sim flags, e.g. --ram-blocks 2000]
# Environment (defaults in brackets):
#   SIMSCALE_INSTANCES  cluster sizes [10 100 1000]
#   SIMSCALE_REQUESTS   trace lengths [12000 100000 1000000]
#   SIMSCALE_RATE       arrival rate per instance, req/s [0.34]
#   SIMSCALE_CPU        the core the runs are pinned to [0]
# Quick run (no 1M traces, about a minute): SIMSCALE_REQUESTS="12000 100000" bench/simscale.sh
set -eu
cd "$(dirname "$0")/.."

instances=${SIMSCALE_INSTANCES:-"10 100 1000"}
requests=${SIMSCALE_REQUESTS:-"12000 100000 1000000"}
rate=${SIMSCALE_RATE:-0.34}
cpu=${SIMSCALE_CPU:-0}

for n in $instances $requests; do
	case $n in
	'' | *[!0-9]* | 0*)
		echo "bench/simscale.sh: SIMSCALE_INSTANCES and SIMSCALE_REQUESTS take positive whole numbers, got \"$n\"" >&2
		exit 2
		;;
	esac
done
if ! awk -v r="$rate" 'BEGIN { exit !(r + 0 > 0 && r ~ /^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$/) }'; then
	echo "bench/simscale.sh: SIMSCALE_RATE is requests/s per instance, a number > 0, got \"$rate\"" >&2
	exit 2
fi

gtime=/usr/bin/time
if ! "$gtime" -f %e true >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "bench/simscale.sh: installing GNU time with apt-get" >&2
		{ apt-get update && apt-get install -y time; } >&2 || true
	fi
	if ! "$gtime" -f %e true >/dev/null 2>&1; then
		echo "bench/simscale.sh: GNU time ($gtime) is missing and cannot be installed (needs root and apt-get); it measures CPU time and max RSS" >&2
		exit 1
	fi
fi
pin="taskset -c $cpu"
if ! taskset -c "$cpu" true >/dev/null 2>&1; then
	echo "bench/simscale.sh: taskset -c $cpu failed; the runs are not pinned (GOMAXPROCS=1 still)" >&2
	pin=""
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/simscale.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/kvpool
go build -o "$bin" ./cmd/kvpool

echo "# bench/simscale.sh: kvpool sim --mode global --routing cache-aware${*:+ $*}, one core (GOMAXPROCS=1 ${pin:-unpinned}), traces: kvpool trace gen --requests N --rate $rate×instances"
echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average: $(cut -d' ' -f1-3 /proc/loadavg), $(git rev-parse --short HEAD 2>/dev/null || echo 'no git')"
printf '%9s %9s %8s %8s %8s %9s %8s %6s %5s\n' instances requests wall_s cpu_s rss_MiB req/s us/req hit load
for p in $instances; do
	r=$(awk -v p="$p" -v r="$rate" 'BEGIN { print p * r }')
	for n in $requests; do
		tr=$tmp/trace.jsonl
		if ! "$bin" trace gen --requests "$n" --rate "$r" -o "$tr" >/dev/null 2>"$tmp/err"; then
			echo "bench/simscale.sh: kvpool trace gen --requests $n --rate $r failed:" >&2
			cat "$tmp/err" >&2
			exit 1
		fi
		load=$(cut -d' ' -f1 /proc/loadavg)
		# shellcheck disable=SC2086 # $pin is a command prefix or nothing
		if ! GOMAXPROCS=1 "$gtime" -f '%e %U %S %M' -o "$tmp/time" $pin "$bin" sim --trace "$tr" --instances "$p" \
			--mode global --routing cache-aware "$@" >"$tmp/out" 2>"$tmp/err"; then
			echo "bench/simscale.sh: kvpool sim --instances $p on $n requests failed:" >&2
			cat "$tmp/err" "$tmp/time" >&2
			exit 1
		fi
		hit=$(awk '$1 == "token" && $2 == "hit" { print $4 }' "$tmp/out")
		awk -v p="$p" -v n="$n" -v hit="$hit" -v load="$load" '{
			printf "%9d %9d %8.2f %8.2f %8.0f %9.0f %8.2f %6s %5s\n", p, n, $1, $2 + $3, $4 / 1024, n / $1, $1 * 1e6 / n, hit, load
		}' "$tmp/time"
		rm -f "$tr"
	done
done
echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg)"
