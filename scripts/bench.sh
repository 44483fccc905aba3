#!/usr/bin/env bash
# `make bench`: brings up a local mesh of sim workers, replays a trace (or a
# synthetic workload) through the frontend with loadtest, writes the report
# into OUT, and stops the mesh.
#
#   TRACE        Mooncake JSONL trace (empty: synthetic workload)
#   DECODE       sim workers (default 8)
#   ROUTER_MODE  kv | round-robin | random | least-loaded (default kv)
#   NUM_BLOCKS   KV blocks per worker (default: the worker's default)
#   SPEED        trace time compression, also the sim speed-up (default 10)
#   LIMIT        replay only the first LIMIT requests (default 1000)
#   OUT          report folder (default results/<mode>-<trace>)
#   LOADTEST_ARGS extra loadtest flags
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DECODE:=8}" "${ROUTER_MODE:=kv}" "${SPEED:=10}" "${LIMIT:=1000}" "${PORT:=8000}"
name="${ROUTER_MODE}-$(basename "${TRACE:-synthetic}" .jsonl)"
: "${OUT:=results/$name}"
worker_args="-sim-speedup $SPEED -sim-context 131072 -sim-vocab 32000"
[ -n "${NUM_BLOCKS:-}" ] && worker_args="$worker_args -num-blocks $NUM_BLOCKS"

scripts/build.sh frontend router decode prefill kvbm-controller planner
go build -o bin/loadtest ./loadtest/cmd/loadtest

log=$(mktemp)
EXECUTOR=sim DECODE=$DECODE PREFILL=0 ROUTERS=1 ROUTER_MODE=$ROUTER_MODE DISCOVERY=file PORT=$PORT \
  WORKER_ARGS="$worker_args" scripts/run-local.sh >"$log" 2>&1 &
mesh=$!
trap 'kill -TERM $mesh 2>/dev/null; wait $mesh 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  grep -q "Switchyard is up" "$log" && break
  kill -0 $mesh 2>/dev/null || { cat "$log"; echo "bench: mesh failed to start" >&2; exit 1; }
  sleep 0.2
done
grep -q "Switchyard is up" "$log" || { cat "$log"; echo "bench: mesh not up after 120s" >&2; exit 1; }

args=(--url "http://127.0.0.1:$PORT" --out "$OUT" --vocab 32000)
if [ -n "${TRACE:-}" ]; then
  args+=(--trace "$TRACE" --speed "$SPEED" --trace-limit "$LIMIT")
else
  args+=(--concurrency 16 --max-requests "$LIMIT")
fi
echo "bench: bin/loadtest ${args[*]} ${LOADTEST_ARGS:-}"
bin/loadtest "${args[@]}" ${LOADTEST_ARGS:-}
echo "bench: report in $OUT"
