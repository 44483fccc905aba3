#!/usr/bin/env bash
# perfcompare.sh: ucx_perftest (server + client on loopback) next to the
# nixl ucx backend's WRITE bandwidth benchmark, in one run, per transport.
# Numbers from a loaded machine drop 5-20x: compare only within one run.
#
#   libs/nixl/scripts/perfcompare.sh   # W=10 BENCHTIME=1s ROUNDS=3 TLSES="tcp sm"
#                                      # SIZES="64KiB 1MiB 16MiB"; perftest iterations
#                                      # N64K=50000, N1=5000, N16=500 (~1 s each)
#
# tag_bw and our (active-message) WRITE run ROUNDS times, alternating, and the medians
# are compared (one run of either swings by 30% on a shared 2-core VM);
# put_bw and our one-sided put once each.
#
# Error handling, like for like: over tcp the backend's endpoints handle
# peer failure (UCP_ERR_HANDLING_MODE_PEER: a dead peer fails its
# transfers instead of hanging them), and with it UCX 1.13 moves
# rendezvous data over tcp as 64K active-message fragments instead of one
# put (ucx_perftest too: its -e). So with PEER_ERR=1 (the default) the tcp
# rows run ucx_perftest -e against the backend's default; PEER_ERR=0 runs
# perftest without -e against the backend with Config.NoPeerErrHandling
# (NIXL_UCX_NO_PEER_ERR=1). Over sm neither handles peer failure (UCX
# 1.13's shared-memory transports cannot), whatever PEER_ERR says.
#
# "pinned" runs each side on a core of its own (taskset: server/target on
# CPU 1, client/initiator on CPU 0), perftest and ours alike. ucx_perftest
# is one thread per side; a Go process also runs its scheduler's threads,
# and on a 2-core machine those took cycles from the other side's copy.
# Pinned, Go's GOMAXPROCS follows the affinity mask (1), so both programs
# run one core per side. Needs taskset and at least 2 CPUs (else "-").
set -euo pipefail
cd "$(dirname "$0")/.."
command -v ucx_perftest >/dev/null || { echo "ucx_perftest not found (apt-get install ucx-utils)" >&2; exit 1; }
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
N64K=${N64K:-50000} N1=${N1:-5000} N16=${N16:-500} W=${W:-10} ROUNDS=${ROUNDS:-3} BENCHTIME=${BENCHTIME:-1s} PORT=${PORT:-13390}
bin=$(mktemp -d)/ucx.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -tags ucx -o "$bin" ./backend/ucx

# Pinning: with PIN=1 the server/target runs on CPU 1 and the client/
# initiator on CPU 0 (see the top of this file).
srv_cpu() { if [ "${PIN:-0}" = 1 ]; then taskset -c 1 "$@"; else "$@"; fi; }
cli_cpu() { if [ "${PIN:-0}" = 1 ]; then taskset -c 0 "$@"; else "$@"; fi; }

PEER_ERR=${PEER_ERR:-1}
# errh TLS -> perftest's error-handling flag for TLS (see above)
errh() { if [ "$1" = tcp ] && [ "$PEER_ERR" = 1 ]; then echo -e; fi; }

# perftest TLS TEST BYTES ITERATIONS -> overall MB/s
perftest() {
	PORT=$((PORT + 1))
	local e
	e=$(errh "$1")
	UCX_TLS=$1 srv_cpu timeout 120 ucx_perftest -p "$PORT" $e >/dev/null 2>&1 &
	local srv=$!
	sleep 0.5
	UCX_TLS=$1 cli_cpu timeout 120 ucx_perftest 127.0.0.1 -p "$PORT" $e -t "$2" -s "$3" -n "$4" -w "$W" 2>/dev/null |
		awk '/^Final:/ {print $7}'
	wait "$srv" 2>/dev/null || true
}

# ours TLS SIZENAME ONESIDED BENCH -> MB/s, in perftest's pattern (one
# buffer, nixltest.PerftestWindow transfers in flight). W is perftest's
# warm-up count (-w), not a window: perftest keeps its default
# outstanding-send limit (-O). BENCH UCX runs both agents in one process,
# UCXTwoProcess puts the target in a child process, as ucx_perftest does
# (pinned with PIN=1: the child through NIXL_UCX_BENCH_TARGET_CPUS).
ours() {
	local target=
	if [ "${PIN:-0}" = 1 ]; then target=1; fi
	local nopeer=0
	if [ "$PEER_ERR" = 0 ]; then nopeer=1; fi
	UCX_TLS=$1 NIXL_UCX_ONE_SIDED=$3 NIXL_UCX_NO_PEER_ERR=$nopeer NIXL_UCX_BENCH_TARGET_CPUS=$target cli_cpu "$bin" -test.run '^$' \
		-test.bench "^Benchmark$4\$/^Perftest\$/^$2\$" -test.benchtime "$BENCHTIME" |
		awk '/^Benchmark/ {for (i = 1; i <= NF; i++) if ($i == "MB/s") print $(i-1)}'
}
pin=0
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then pin=1; fi

pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else print "n/a" }'; }

# median of the arguments (empty ones ignored)
median() { printf '%s\n' "$@" | awk 'NF' | sort -g | awk '{v[NR] = $1} END { if (NR) print v[int((NR + 1) / 2)] }'; }

if [ "$PEER_ERR" = 1 ]; then
	echo "PEER_ERR=1: over tcp, ucx_perftest -e against the backend's default (both handle peer failure)"
else
	echo "PEER_ERR=0: over tcp, ucx_perftest against the backend without peer error handling"
fi
printf '%-5s %-6s %12s %12s %12s %8s %8s %12s %12s %8s %12s %12s %8s\n' TLS size perftest-tag write-1proc write-2proc '1p%tag' '2p%tag' \
	pinned-tag pinned-2proc 'pin%tag' perftest-put put-2proc '%put'
for tls in ${TLSES:-tcp sm}; do
	for size in ${SIZES:-64KiB 1MiB 16MiB}; do
		case $size in
		64KiB) bytes=65536 n=$N64K ;;
		1MiB) bytes=1048576 n=$N1 ;;
		16MiB) bytes=16777216 n=$N16 ;;
		esac
		tags=() ones=() twos=() ptags=() ptwos=()
		for _ in $(seq "$ROUNDS"); do
			tags+=("$(perftest "$tls" tag_bw "$bytes" "$n")")
			ones+=("$(ours "$tls" "$size" 0 UCX)")
			twos+=("$(ours "$tls" "$size" 0 UCXTwoProcess)")
			if [ "$pin" = 1 ]; then
				ptags+=("$(PIN=1 perftest "$tls" tag_bw "$bytes" "$n")")
				ptwos+=("$(PIN=1 ours "$tls" "$size" 0 UCXTwoProcess)")
			fi
		done
		tag=$(median "${tags[@]}") one=$(median "${ones[@]}") two=$(median "${twos[@]}")
		ptag=$(median "${ptags[@]}") ptwo=$(median "${ptwos[@]}")
		put=$(perftest "$tls" ucp_put_bw "$bytes" "$n")
		oput=$(ours "$tls" "$size" 1 UCXTwoProcess)
		printf '%-5s %-6s %12s %12s %12s %8s %8s %12s %12s %8s %12s %12s %8s\n' "$tls" "$size" "${tag:-?}" "${one:-?}" "${two:-?}" \
			"$(pct "${one:-0}" "${tag:-0}")" "$(pct "${two:-0}" "${tag:-0}")" \
			"${ptag:--}" "${ptwo:--}" "$(pct "${ptwo:-0}" "${ptag:-0}")" \
			"${put:-?}" "${oput:-?}" "$(pct "${oput:-0}" "${put:-0}")"
	done
done
