#!/bin/sh
# bench/resp.sh: kvpool's Redis front beside redis-server (issue 16), in one
# run and with the same client: redis-benchmark -t set,get -c 8 -d SIZE
# against a one-node `kvpool up` cluster's Redis port and against a
# redis-server (--save '' --appendonly no) on the same machine, at 4 KiB,
# 256 KiB and 1 MiB. The two targets alternate (the first of each pair
# alternates too), each pair is repeated R times, and the table gives the
# medians: requests/s, their ratio (kvpool / redis), p99, and PASS/FAIL
# against issue 16's targets: GET >= 1.0x redis-server, SET >= 0.8x.
#
# redis-benchmark does not check replies, so an error reply would count as
# a fast request: every run reads total_error_replies from INFO before and
# after, and a run with errors makes its row ERROR, never PASS.
#
# Installs redis-tools and redis-server with apt-get when they are missing
# and this shell may (root); without them it stops, saying so.
#
# Usage: bench/resp.sh
# Environment (defaults in brackets):
#   RESP_SIZES   value sizes in bytes [4096 262144 1048576]
#   RESP_N       requests per test at every size [by size: 200000, 50000,
#                6000, ~3-5 s per test for redis-server on the project's
#                2-core VM; a kvpool test at a ratio r takes 1/r as long]
#   RESP_R       repetitions of each pair [3]
#   RESP_CONNS   connections (redis-benchmark -c) [8]
#   RESP_RAM     the kvpool node's RAM (kvpool up --ram) [2GiB]
#   RESP_PROCS   GOMAXPROCS of kvpool's processes [1: one core, as
#                redis-server serves from one event-loop thread; on a
#                2-core machine a Go runtime with both cores spins on the
#                one redis-benchmark needs (GET 4 KiB measured 0.70x at 2
#                against 1.0x at 1). Empty: Go's default, the CPUs]
# Smoke test: RESP_N=2000 RESP_R=1 bench/resp.sh
set -eu
cd "$(dirname "$0")/.."

sizes=${RESP_SIZES:-"4096 262144 1048576"}
reps=${RESP_R:-3}
conns=${RESP_CONNS:-8}
ram=${RESP_RAM:-2GiB}
procs=${RESP_PROCS-1}

# requests SIZE: the number of requests per test at SIZE.
requests() {
	if [ -n "${RESP_N:-}" ]; then
		echo "$RESP_N"
	elif [ "$1" -le 16384 ]; then
		echo 200000
	elif [ "$1" -le 524288 ]; then
		echo 50000
	else
		echo 6000
	fi
}

need=""
command -v redis-benchmark >/dev/null 2>&1 || need="redis-tools"
command -v redis-cli >/dev/null 2>&1 || need="redis-tools"
command -v redis-server >/dev/null 2>&1 || need="$need redis-server"
if [ -n "$need" ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "bench/resp.sh: installing$need with apt-get" >&2
		# shellcheck disable=SC2086 # $need is a list of package names
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $need; } >&2 ||
			echo "bench/resp.sh: apt-get install$need failed" >&2
	fi
	for t in redis-benchmark redis-cli redis-server; do
		if ! command -v "$t" >/dev/null 2>&1; then
			echo "bench/resp.sh: $t is missing and could not be installed (needs root and apt-get; Debian packages redis-tools, redis-server)" >&2
			exit 1
		fi
	done
fi

# Everything this run makes lives in $tmp, and every process it starts is
# stopped on exit, interrupted or not.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvpool-resp.XXXXXX")
uppid=""
rspid=""
rbpid=""
cleanup() {
	if [ -n "$rbpid" ]; then
		kill -TERM "$rbpid" 2>/dev/null || true
		wait "$rbpid" 2>/dev/null || true
	fi
	if [ -n "$uppid" ]; then
		kill -TERM "$uppid" 2>/dev/null || true
		wait "$uppid" 2>/dev/null || true
	fi
	if [ -n "$rspid" ]; then
		kill -TERM "$rspid" 2>/dev/null || true
		wait "$rspid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A binary of its own, as bench/vs.sh builds: another tree's run at the same
# time does not replace it.
bin=$tmp/kvpool
go build -o "$bin" ./cmd/kvpool

# ping HOST PORT: true once the server answers PONG.
ping() { [ "$(redis-cli -h "$1" -p "$2" PING 2>/dev/null)" = PONG ]; }

# The kvpool cluster on free ports; its stdout names each node's Redis port.
if [ -n "$procs" ]; then
	GOMAXPROCS=$procs "$bin" up --nodes 1 --quiet --ram "$ram" >"$tmp/up.out" 2>"$tmp/up.err" &
else
	"$bin" up --nodes 1 --quiet --ram "$ram" >"$tmp/up.out" 2>"$tmp/up.err" &
fi
uppid=$!
kvaddr=""
i=0
while [ -z "$kvaddr" ]; do
	if ! kill -0 "$uppid" 2>/dev/null; then
		echo "bench/resp.sh: kvpool up exited:" >&2
		cat "$tmp/up.err" >&2
		exit 1
	fi
	i=$((i + 1))
	if [ "$i" -gt 600 ]; then
		echo "bench/resp.sh: kvpool up printed no redis address in 120 s" >&2
		exit 1
	fi
	sleep 0.2
	kvaddr=$(sed -n 's/^node-0 .* redis \([^ ]*\) .*/\1/p' "$tmp/up.out")
done
kvhost=${kvaddr%:*}
kvport=${kvaddr##*:}

# redis-server on a free port: a random one, another when it is taken.
rshost=127.0.0.1
rsport=""
for try in 1 2 3 4 5 6 7 8 9 10; do
	p=$(($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 30000 + 20000))
	redis-server --port "$p" --bind "$rshost" --save '' --appendonly no --daemonize no \
		--logfile "$tmp/redis.log" &
	rspid=$!
	i=0
	while [ "$i" -lt 100 ] && kill -0 "$rspid" 2>/dev/null && ! ping "$rshost" "$p"; do
		i=$((i + 1))
		sleep 0.1
	done
	if ping "$rshost" "$p"; then
		rsport=$p
		break
	fi
	kill -TERM "$rspid" 2>/dev/null || true
	wait "$rspid" 2>/dev/null || true
	rspid=""
done
if [ -z "$rsport" ]; then
	echo "bench/resp.sh: redis-server did not start on a free port (ten tries); its log:" >&2
	tail -5 "$tmp/redis.log" >&2 || true
	exit 1
fi
i=0
until ping "$kvhost" "$kvport"; do
	i=$((i + 1))
	if [ "$i" -gt 100 ]; then
		echo "bench/resp.sh: kvpool's Redis port $kvaddr does not answer PING" >&2
		exit 1
	fi
	sleep 0.1
done

# errors HOST PORT: the server's total_error_replies.
errors() {
	redis-cli -h "$1" -p "$2" INFO stats | tr -d '\r' | sed -n 's/^total_error_replies://p'
}

# run NAME HOST PORT SIZE N: one redis-benchmark run; appends
# "name size op rps p99 errors" lines to $tmp/results.
run() {
	e0=$(errors "$2" "$3")
	# In the background, so that a signal stops the run at once (the shell
	# runs its trap only after a foreground command ends).
	redis-benchmark -h "$2" -p "$3" -t set,get -c "$conns" -d "$4" -n "$5" --csv >"$tmp/run.csv" 2>"$tmp/run.err" &
	rbpid=$!
	rc=0
	wait "$rbpid" || rc=$?
	rbpid=""
	if [ "$rc" != 0 ]; then
		echo "bench/resp.sh: redis-benchmark against $1 ($2:$3) failed:" >&2
		cat "$tmp/run.err" >&2
		exit 1
	fi
	e1=$(errors "$2" "$3")
	# --csv: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
	tr -d '"' <"$tmp/run.csv" | awk -F, -v t="$1" -v s="$4" -v e=$((e1 - e0)) \
		'$1 == "SET" || $1 == "GET" { print t, s, $1, $2, $7, e }' >>"$tmp/results"
}

: >"$tmp/results"
echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average: $(cut -d' ' -f1-3 /proc/loadavg), $(git rev-parse --short HEAD 2>/dev/null || echo 'no git')"
echo "# redis-benchmark -t set,get -c $conns -d SIZE -n N --csv, $reps pair(s) per size, medians; kvpool $kvaddr (GOMAXPROCS=${procs:-default} kvpool up --nodes 1 --ram $ram), $(redis-server --version | cut -d' ' -f1-3) $rshost:$rsport"
for size in $sizes; do
	n=$(requests "$size")
	r=1
	while [ "$r" -le "$reps" ]; do
		if [ $((r % 2)) = 1 ]; then
			run redis "$rshost" "$rsport" "$size" "$n"
			run kvpool "$kvhost" "$kvport" "$size" "$n"
		else
			run kvpool "$kvhost" "$kvport" "$size" "$n"
			run redis "$rshost" "$rsport" "$size" "$n"
		fi
		r=$((r + 1))
	done
done

# The table: medians per size, op and target; a target's errors summed.
awk '
function median(list,    a, n, i, j, t) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
function human(b) {
	if (b >= 1048576 && b % 1048576 == 0) return b / 1048576 " MiB"
	if (b >= 1024 && b % 1024 == 0) return b / 1024 " KiB"
	return b " B"
}
{
	k = $2 SUBSEP $3
	if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
	rps[$1, k] = rps[$1, k] " " $4
	p99[$1, k] = p99[$1, k] " " $5
	err[$1, k] += $6
}
END {
	printf "%-8s  %-3s  %12s  %12s  %6s  %13s  %14s  %s\n", "size", "op", "redis rps", "kvpool rps", "ratio", "redis p99 ms", "kvpool p99 ms", "verdict"
	fail = 0
	for (i = 1; i <= nk; i++) {
		k = order[i]
		split(k, f, SUBSEP)
		rr = median(rps["redis", k]); kr = median(rps["kvpool", k])
		ratio = rr > 0 ? kr / rr : 0
		want = f[2] == "GET" ? 1.0 : 0.8
		if (err["redis", k] + err["kvpool", k] > 0) {
			v = sprintf("ERROR (%d error replies from redis, %d from kvpool)", err["redis", k], err["kvpool", k]); fail = 1
		} else if (ratio >= want) {
			v = sprintf("PASS (>= %.1f)", want)
		} else {
			v = sprintf("FAIL (< %.1f)", want); fail = 1
		}
		printf "%-8s  %-3s  %12.0f  %12.0f  %5.2fx  %13.3f  %14.3f  %s\n", human(f[1]), f[2], rr, kr, ratio, median(p99["redis", k]), median(p99["kvpool", k]), v
	}
	exit fail
}' "$tmp/results" || status=$?
echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "${status:-0}"
