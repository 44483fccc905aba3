#!/usr/bin/env bash
# `make bench`: brings up a local mesh of sim workers (scripts/run-local.sh),
# replays a Mooncake trace (or a synthetic workload) through the frontend with
# loadtest, writes the report into OUT, and always stops the mesh (on success,
# failure and Ctrl-C). See docs/benchmarks.md.
#
#   TRACE        conversation | synthetic | path to a Mooncake JSONL trace
#                (empty: loadtest's synthetic multi-turn workload)
#   DECODE       sim workers (default 8)
#   ROUTER_MODE  kv | round-robin | random | least-loaded (default kv)
#   NUM_BLOCKS   KV blocks of 16 tokens per worker (default: the worker's
#                default, room for 16 full-context sequences = SIM_CONTEXT blocks)
#   SPEED        trace time compression, also the sim speed-up, so the load
#                relative to capacity is the real trace's (default 8)
#   RATE         arrival rate relative to the trace's own: the trace is
#                compressed SPEED*RATE times against workers SPEED times
#                faster, so RATE 1.25 is 25% more load (default 1)
#   LIMIT        replay the first LIMIT trace requests, 0 = the whole trace
#                / send LIMIT synthetic requests (default 1000)
#   SIM_CONTEXT  sim context length (default 131072: the traces' prompts reach
#                126k tokens; longer ones are cut to SIM_CONTEXT-2048)
#   SIM_KV_BYTES KV bytes a token in each sim worker's arena (default 4: a
#                64-byte block, so workers move KV for prefix pulls over the
#                tcp transfer backend; 0: no arena, no prefix pulls, every
#                prompt prefilled locally)
#   OUT          report folder (default results/<trace>-<mode>[-<blocks>])
#   PORT         frontend port (default 8000)
#   BASE_PORT    first internal port (default 9000): router BASE, decode
#                BASE+200+i, kvbm-controller BASE+300, planner BASE+400
#   NO_BUILD=1   skip building bin/
#   KV_HOST_BLOCKS, KV_DISK_BLOCKS  lower KV tiers per worker (default 0: the
#                device-only baseline; see scripts/run-local.sh)
#   LOADTEST_ARGS, WORKER_ARGS, ROUTER_ARGS  extra flags
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DECODE:=8}" "${ROUTER_MODE:=kv}" "${SPEED:=8}" "${RATE:=1}" "${LIMIT:=1000}" "${PORT:=8000}" "${BASE_PORT:=9000}" "${SIM_CONTEXT:=131072}" "${SIM_KV_BYTES:=4}"
die() { echo "bench: $*" >&2; exit 2; }
for v in DECODE LIMIT PORT BASE_PORT SIM_CONTEXT SIM_KV_BYTES; do [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v=${!v}: want a number"; done
for v in SPEED RATE; do
  [[ "${!v}" =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk "BEGIN{exit !(${!v} > 0)}" || die "$v=${!v}: want a positive number"
done
[ -z "${NUM_BLOCKS:-}" ] || [[ "$NUM_BLOCKS" =~ ^[0-9]+$ ]] || die "NUM_BLOCKS=$NUM_BLOCKS: want a number"

case "${TRACE:-}" in
  conversation | synthetic) TRACE="../shared/traces/${TRACE}_trace.jsonl" ;;
esac
[ -z "${TRACE:-}" ] || [ -f "$TRACE" ] || die "TRACE=$TRACE: no such file (conversation, synthetic or a path)"
name="$(basename "${TRACE:-synthetic-workload}" .jsonl)"
name="${name%_trace}-$ROUTER_MODE${NUM_BLOCKS:+-$NUM_BLOCKS}"
: "${OUT:=results/$name}"

# run-local.sh refuses ports already in use (another mesh running).

if [ -z "${NO_BUILD:-}" ]; then
  scripts/build.sh frontend router decode kvbm-controller planner supervisor
  go build -o bin/loadtest ./loadtest/cmd/loadtest
fi

# The router's predicted prefill load of a block should last as long as the
# sim takes to prefill it: prefill_ms(512)/32 blocks ≈ 2.0 ms, over the speed-up.
pbt=$(awk "BEGIN{printf \"%dus\", 2016 / $SPEED}")
worker_args="-sim-speedup $SPEED -sim-context $SIM_CONTEXT -sim-vocab 32000 -sim-kv-bytes-per-token $SIM_KV_BYTES${NUM_BLOCKS:+ -num-blocks $NUM_BLOCKS} ${WORKER_ARGS:-}"
router_args="-prefill-block-time $pbt ${ROUTER_ARGS:-}"

mkdir -p "$OUT"
# A run into a folder used before must not report the earlier run's
# numbers if this one fails before writing its own.
rm -rf "$OUT/summary.json" "$OUT/requests.csv" "$OUT/metrics" "$OUT/mesh-logs"
log="$OUT/mesh.log"
# run-local.sh gets its own session so a Ctrl-C reaches only loadtest (which
# then writes its report); the mesh is stopped by stop() below, in order.
EXECUTOR=sim DECODE=$DECODE PREFILL=0 ROUTERS=1 ROUTER_MODE=$ROUTER_MODE DISCOVERY=file PORT=$PORT BASE_PORT=$BASE_PORT \
  WORKER_ARGS="$worker_args" ROUTER_ARGS="$router_args" MODEL='' TOKENIZER='' \
  KV_HOST_BLOCKS="${KV_HOST_BLOCKS:-0}" KV_DISK_BLOCKS="${KV_DISK_BLOCKS:-0}" \
  setsid scripts/run-local.sh >"$log" 2>&1 </dev/null &
mesh=$!
stop() {
  trap - EXIT INT TERM
  kill -0 "$mesh" 2>/dev/null || return 0
  echo "bench: stopping the mesh"
  kill -TERM "$mesh" 2>/dev/null || true
  for _ in $(seq 150); do kill -0 "$mesh" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$mesh" 2>/dev/null; then
    echo "bench: mesh still up after 30s; killing it" >&2
    kill -KILL -- "-$mesh" 2>/dev/null || true
  fi
  wait "$mesh" 2>/dev/null || true
  local state
  state=$(sed -n 's/^run: starting the mesh (state in \(.*\))$/\1/p' "$log")
  [ -n "$state" ] && [ -d "$state/logs" ] && cp -r "$state/logs" "$OUT/mesh-logs" && rm -rf "$state"
  return 0
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for _ in $(seq 600); do
  grep -q "Switchyard is up" "$log" && break
  kill -0 "$mesh" 2>/dev/null || { cat "$log" >&2; die "the mesh failed to start (log: $log)"; }
  sleep 0.2
done
grep -q "Switchyard is up" "$log" || { cat "$log" >&2; die "the mesh is not up after 120s (log: $log)"; }
sleep 2 # let the router finish its KV event subscriptions (dumps of empty caches)

args=(--url "http://127.0.0.1:$PORT" --out "$OUT" --vocab 32000 --progress lines --progress-interval 15s)
ceiling=""
if [ -n "${TRACE:-}" ]; then
  maxin=$((SIM_CONTEXT - 2048))
  args+=(--trace "$TRACE" --speed "$(awk "BEGIN{print $SPEED * $RATE}")" --trace-limit "$LIMIT" --max-input-tokens "$maxin" --max-output-tokens 2048)
  if command -v python3 >/dev/null; then
    scripts/trace-ceiling.py "$TRACE" "$LIMIT" "$maxin" >"$OUT/ceiling.json"
    ceiling=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token_ceiling"])' "$OUT/ceiling.json")
  fi
else
  args+=(--concurrency 16 --max-requests "$LIMIT")
fi
cat >"$OUT/bench.env" <<ENV
TRACE=${TRACE:-}
DECODE=$DECODE
ROUTER_MODE=$ROUTER_MODE
NUM_BLOCKS=${NUM_BLOCKS:-default ($SIM_CONTEXT)}
SPEED=$SPEED
RATE=$RATE
LIMIT=$LIMIT
SIM_CONTEXT=$SIM_CONTEXT
SIM_KV_BYTES=$SIM_KV_BYTES
WORKER_ARGS=$worker_args
ROUTER_ARGS=$router_args
LOADTEST_ARGS=${LOADTEST_ARGS:-}
ENV
echo "bench: $DECODE sim workers, router $ROUTER_MODE, KV ${NUM_BLOCKS:-default} blocks, speed $SPEED"
echo "bench: bin/loadtest ${args[*]} ${LOADTEST_ARGS:-}"
rc=0
bin/loadtest "${args[@]}" ${LOADTEST_ARGS:-} || rc=$?
# The services' own counters, read before they stop: per-worker prompt and
# prefix-hit tokens and preemptions, the router's decisions and matches,
# the frontend's own TTFT and latency histograms.
mkdir -p "$OUT/metrics"
curl -fsS "http://127.0.0.1:$BASE_PORT/metrics" >"$OUT/metrics/router-0.txt" 2>/dev/null || true
curl -fsS "http://127.0.0.1:$PORT/metrics" >"$OUT/metrics/frontend.txt" 2>/dev/null || true
for i in $(seq 0 $((DECODE - 1))); do
  curl -fsS "http://127.0.0.1:$((BASE_PORT + 200 + i))/metrics" >"$OUT/metrics/decode-$i.txt" 2>/dev/null || true
done
if command -v python3 >/dev/null && [ -f "$OUT/summary.json" ]; then
  python3 - "$OUT" "$ceiling" <<'PY' || true
import glob, json, os, sys
out, c = sys.argv[1], float(sys.argv[2] or 0)
r = json.load(open(os.path.join(out, "summary.json")))["results"]
h = r.get("cache_hit_ratio", 0)
if c:
    print(f"bench: prefix hit ratio {100*h:.2f}% vs infinite-cache ceiling {100*c:.2f}% ({100*h/c:.0f}% of it)")
# Each metrics file is read once: its samples as (series, value) pairs,
# the series being the name with its labels.
def samples(path):
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return []
    return [(l.rsplit(None, 1)[0], float(l.rsplit(None, 1)[1])) for l in lines if l and not l.startswith("#")]
m = os.path.join(out, "metrics")
workers = {p: samples(p) for p in sorted(glob.glob(os.path.join(m, "decode-*.txt")))}
frontend, router = samples(os.path.join(m, "frontend.txt")), samples(os.path.join(m, "router-0.txt"))
def metric(ss, name):
    return next((v for k, v in ss if k == name), 0.0)
rows = [(os.path.basename(p)[:-4], metric(ss, "switchyard_worker_prompt_tokens_total"),
         metric(ss, "switchyard_worker_prefix_hit_tokens_total"), metric(ss, "switchyard_worker_preemptions_total"))
        for p, ss in workers.items()]
total = sum(x[1] for x in rows) or 1
print("bench: per worker (share of prompt tokens / prefix hit / preemptions): " + ", ".join(
    f"{w} {100*p/total:.0f}%/{100*hit/(p or 1):.0f}%/{int(pre)}" for w, p, hit, pre in rows))
# Where the mean TTFT goes: the workers' own split (waiting for admission,
# then computing the prompt), the frontend's view (its Route call, the
# router's handler) and what lies between loadtest and the frontend.
def mean_ms(sets, name, match=""):
    s = n = 0.0
    for ss in sets:
        for k, v in ss:
            if match not in k:
                continue
            if k.startswith(name + "_sum"):
                s += v
            elif k.startswith(name + "_count"):
                n += v
    return 1000 * s / n if n else None
client = r.get("ttft_ms", {}).get("mean")
parts = {
    "queue": mean_ms(workers.values(), "switchyard_worker_ttft_queue_seconds"),
    "prefill": mean_ms(workers.values(), "switchyard_worker_ttft_prefill_seconds"),
    "frontend": mean_ms([frontend], "switchyard_frontend_time_to_first_token_seconds"),
    "route": mean_ms([frontend], "rpc_client_call_duration_seconds", "RouterService/Route"),
    "handler": mean_ms([router], "rpc_server_call_duration_seconds", "RouterService/Route"),
}
if client and None not in parts.values():
    q, pf, fe = parts["queue"], parts["prefill"], parts["frontend"]
    print(f"bench: mean TTFT {client:.1f} ms = worker queue {q:.1f} + worker prefill {pf:.1f}"
          f" + frontend and router {fe - q - pf:.1f} (Route call {parts['route']:.1f}, its handler {parts['handler']:.1f})"
          f" + loadtest to frontend and back {client - fe:.1f}")
PY
fi
stop
echo "bench: report in $OUT"
exit "$rc"
