#!/usr/bin/env bash
# perfcompare.sh: ucx_perftest (server + client on loopback) next to the
# nixl ucx backend's WRITE bandwidth benchmark, in one run, per transport.
# Numbers from a loaded machine drop 5-20x: compare only within one run.
#
#   libs/nixl/scripts/perfcompare.sh   # W=10 BENCHTIME=1s; perftest iterations:
#                                      # N1=5000 at 1 MiB, N16=500 at 16 MiB (~1 s each)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v ucx_perftest >/dev/null || { echo "ucx_perftest not found (apt-get install ucx-utils)" >&2; exit 1; }
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
N1=${N1:-5000} N16=${N16:-500} W=${W:-10} BENCHTIME=${BENCHTIME:-1s} PORT=${PORT:-13390}
bin=$(mktemp -d)/ucx.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -tags ucx -o "$bin" ./backend/ucx

# perftest TLS TEST BYTES ITERATIONS -> overall MB/s
perftest() {
	PORT=$((PORT + 1))
	UCX_TLS=$1 timeout 120 ucx_perftest -p "$PORT" >/dev/null 2>&1 &
	local srv=$!
	sleep 0.5
	UCX_TLS=$1 timeout 120 ucx_perftest 127.0.0.1 -p "$PORT" -t "$2" -s "$3" -n "$4" -w "$W" 2>/dev/null |
		awk '/^Final:/ {print $7}'
	wait "$srv" 2>/dev/null || true
}

# ours TLS SIZENAME ONESIDED BENCH -> MB/s, in perftest's pattern (window W,
# one buffer; nixltest.PerftestWindow must equal W). BENCH UCX runs both
# agents in one process, UCXTwoProcess puts the target in a child process,
# as ucx_perftest does.
ours() {
	UCX_TLS=$1 NIXL_UCX_ONE_SIDED=$3 "$bin" -test.run '^$' -test.bench "^Benchmark$4\$/^Perftest\$/^$2\$" -test.benchtime "$BENCHTIME" |
		awk '/^Benchmark/ {for (i = 1; i <= NF; i++) if ($i == "MB/s") print $(i-1)}'
}

pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else print "n/a" }'; }

printf '%-5s %-6s %12s %12s %12s %12s %12s %8s %8s\n' TLS size perftest-tag perftest-put tagged-1proc tagged-2proc put-2proc '%tag' '%put'
for tls in tcp sm; do
	for size in 1MiB 16MiB; do
		bytes=$((${size%MiB} << 20)) n=$N1
		[ "$size" = 16MiB ] && n=$N16
		tag=$(perftest "$tls" tag_bw "$bytes" "$n")
		put=$(perftest "$tls" ucp_put_bw "$bytes" "$n")
		one=$(ours "$tls" "$size" 0 UCX)
		two=$(ours "$tls" "$size" 0 UCXTwoProcess)
		oput=$(ours "$tls" "$size" 1 UCXTwoProcess)
		printf '%-5s %-6s %12s %12s %12s %12s %12s %8s %8s\n' "$tls" "$size" "${tag:-?}" "${put:-?}" "${one:-?}" "${two:-?}" "${oput:-?}" \
			"$(pct "${two:-0}" "${tag:-0}")" "$(pct "${oput:-0}" "${put:-0}")"
	done
done
