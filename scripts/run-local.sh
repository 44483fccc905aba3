#!/usr/bin/env bash
# Starts the whole Switchyard mesh on loopback (called by `make run` after
# `make build`) and serves until Ctrl-C, then stops every process it started.
#
# Settings (environment, all optional):
#   MODEL        llama2.c checkpoint; empty = the built-in tiny-random model
#   TOKENIZER    tokenizer.bin for MODEL (default: found beside the model)
#   EXECUTOR     llama | sim
#   PREFILL      number of prefill workers (0 = aggregated serving)
#   DECODE       number of decode workers
#   ROUTERS      number of router replicas
#   ROUTER_MODE  kv | round-robin | random | least-loaded
#   DISCOVERY    file | consul (consul: a local dev agent is started too)
#   PORT         the frontend's port (OpenAI API)
#   BASE_PORT    first port of the internal services (default 9000): routers
#                BASE+i, prefill BASE+100+i, decode BASE+200+i,
#                kvbm-controller BASE+300, planner BASE+400
#   DISAGG_THRESHOLD  with PREFILL > 0: uncached prompt tokens above which a
#                request is prefilled on a prefill worker (router and decode
#                workers get the same -disagg-threshold-tokens; default 64, so
#                a few hundred tokens go remote on the tiny-random model)
#   KV_HOST_BLOCKS  KV blocks each worker keeps in host memory below its pool
#                (libs/kvbm G2; default 4096; 0 turns the tier off)
#   KV_DISK_BLOCKS  KV blocks each worker keeps on local disk, in the run's
#                state directory (G3; default 8192; 0 turns the tier off).
#                Both need KV bytes: on with the llama executor, and with
#                the sim executor only when WORKER_ARGS sets
#                -sim-kv-bytes-per-token
#   KVBM_S3      the shared object-store KV tier (G4) every worker loads
#                from: "local" starts a versitygw (S3 server) on BASE+500
#                with its data in the state directory; a URL uses that
#                store (bucket KVBM_S3_BUCKET, default switchyard-kv;
#                credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY);
#                empty (default): no shared tier. The kvbm-controller
#                keeps the store's catalog, under a byte budget of
#                KVBM_S3_CAPACITY (default 64GiB; 0: none)
#   WORKER_ARGS, ROUTER_ARGS, FRONTEND_ARGS  extra flags for those services
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BASE_PORT:=9000}" "${EXECUTOR:=llama}" "${PREFILL:=0}" "${DECODE:=1}" "${ROUTERS:=1}" "${ROUTER_MODE:=kv}" "${DISCOVERY:=file}" "${PORT:=8000}"
die() { echo "run: $*" >&2; exit 2; }
for v in PREFILL DECODE ROUTERS PORT BASE_PORT; do [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v=${!v}: want a number"; done
(( DECODE >= 1 )) || die "DECODE=$DECODE: at least one decode worker is needed"
(( ROUTERS >= 1 )) || die "ROUTERS=$ROUTERS: at least one router is needed"
[ -z "${MODEL:-}" ] || [ -f "$MODEL" ] || die "MODEL=$MODEL: no such file"
command -v curl >/dev/null || die "curl is needed for the health checks (apt-get install curl)"

# The mesh's ports are fixed: with one already taken (another mesh still
# running?) a service would fail to bind or, worse, the health checks below
# would be answered by someone else's. Refuse before starting anything.
b=$BASE_PORT
ports=($(seq $((b + 200)) $((b + 200 + DECODE - 1))) $(seq $b $((b + ROUTERS - 1))) $((b + 300)) $((b + 400)) "$PORT")
if (( PREFILL > 0 )); then ports+=($(seq $((b + 100)) $((b + 100 + PREFILL - 1)))); fi
busy=("${ports[@]}")
[ "$DISCOVERY" = consul ] && busy+=(8500)
[ "${KVBM_S3:-}" = local ] && busy+=($((b + 500)))
for port in "${busy[@]}"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    die "127.0.0.1:$port is in use (another mesh running? stop it, or set PORT and BASE_PORT)"
  fi
done

state=$(mktemp -d "${TMPDIR:-/tmp}/switchyard-run.XXXXXX")
logs="$state/logs"; mkdir -p "$logs"
pids=()
cleanup() {
  trap - INT TERM EXIT
  echo; echo "run: stopping ${#pids[@]} processes"
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  echo "run: stopped; logs kept in $logs"
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap cleanup EXIT

# wait_up TRIES WHAT CHECK...: run CHECK every 0.2 s until it succeeds,
# dying when a started process exits or after TRIES tries.
wait_up() {
  local tries=$1 what=$2; shift 2
  for _ in $(seq "$tries"); do
    "$@" && return 0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || die "a process exited while waiting for $what; see $logs"; done
    sleep 0.2
  done
  die "$what not up after $((tries / 5))s; see $logs"
}
leader() { curl -fsS http://127.0.0.1:8500/v1/status/leader 2>/dev/null | grep -q :; }
healthy() { curl -fsS "http://127.0.0.1:$1/health" >/dev/null 2>&1; }

common=(-discovery "$DISCOVERY")
if [ "$DISCOVERY" = consul ]; then
  consul=$(scripts/deps.sh | tail -2 | head -1)
  "$consul" agent -dev -bind 127.0.0.1 -client 127.0.0.1 -log-level warn >"$logs/consul.log" 2>&1 &
  pids+=($!)
  wait_up 100 "the consul agent (a leader)" leader
  common+=(-consul-addr 127.0.0.1:8500)
  echo "run: consul dev agent at http://127.0.0.1:8500 (UI: /ui)"
elif [ "$DISCOVERY" = file ]; then
  common+=(-discovery-dir "$state/discovery")
else
  die "DISCOVERY=$DISCOVERY: want file or consul"
fi

worker=(-executor "$EXECUTOR" ${WORKER_ARGS:-})
kvbm=()
: "${KV_HOST_BLOCKS:=4096}" "${KV_DISK_BLOCKS:=8192}"
for v in KV_HOST_BLOCKS KV_DISK_BLOCKS; do [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v=${!v}: want a number"; done
tiers_on=1
[ "$EXECUTOR" = sim ] && ! [[ "${WORKER_ARGS:-}" =~ -sim-kv-bytes-per-token[[:space:]=]+[1-9] ]] && tiers_on=0
if [ -n "${KVBM_S3:-}" ]; then
  bucket=${KVBM_S3_BUCKET:-switchyard-kv}
  if [ "$KVBM_S3" = local ]; then
    gw=$(scripts/deps.sh | tail -1)
    s3="http://127.0.0.1:$((BASE_PORT + 500))"
    export AWS_ACCESS_KEY_ID=switchyard-local AWS_SECRET_ACCESS_KEY=switchyard-local-secret
    mkdir -p "$state/s3"
    ROOT_ACCESS_KEY=$AWS_ACCESS_KEY_ID ROOT_SECRET_KEY=$AWS_SECRET_ACCESS_KEY \
      "$gw" --port "127.0.0.1:$((BASE_PORT + 500))" --quiet posix "$state/s3" >"$logs/versitygw.log" 2>&1 &
    pids+=($!)
    # Create the bucket (SigV4 through curl; S3 wants the empty body's hash).
    s3up() { curl -fsS -o /dev/null --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
      -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" -X PUT "$s3/$bucket" 2>/dev/null; }
    wait_up 100 "the local S3 store (versitygw)" s3up
    echo "run: local S3 store at $s3 (bucket $bucket, data in $state/s3)"
  else
    s3=$KVBM_S3
  fi
  (( tiers_on )) || die "KVBM_S3: a sim worker has no KV bytes to keep; set -sim-kv-bytes-per-token in WORKER_ARGS"
  worker+=(-kv-s3-endpoint "$s3" -kv-s3-bucket "$bucket")
  # The controller keeps the store's catalog and its budget
  # (KVBM_S3_CAPACITY, default 64GiB; 0: none).
  kvbm+=(-s3-endpoint "$s3" -s3-bucket "$bucket" -s3-capacity "${KVBM_S3_CAPACITY:-64GiB}")
fi
# tiers WORKER: the KV tier flags of one worker (its disk tier in its own directory).
tiers() {
  (( tiers_on )) || return 0
  (( KV_HOST_BLOCKS > 0 )) && printf '%s\n' -kv-host-blocks "$KV_HOST_BLOCKS"
  (( KV_DISK_BLOCKS > 0 )) && printf '%s\n' -kv-disk-dir "$state/kv/$1" -kv-disk-blocks "$KV_DISK_BLOCKS"
  return 0
}
[ -n "${MODEL:-}" ] && worker+=(-model "$MODEL")
[ -n "${TOKENIZER:-}" ] && worker+=(-tokenizer "$TOKENIZER")
disagg=()
(( PREFILL > 0 )) && disagg=(-disagg-threshold-tokens "${DISAGG_THRESHOLD:-64}")

start() { # name binary args...
  local name=$1; shift
  "$@" >"$logs/$name.log" 2>&1 &
  pids+=($!)
  printf '  %-18s pid %-7s log %s\n' "$name" "$!" "$logs/$name.log"
}
echo "run: starting the mesh (state in $state)"
for i in $(seq 0 $((DECODE - 1))); do
  mapfile -t kv < <(tiers "decode-$i")
  start "decode-$i" bin/decode "${common[@]}" "${worker[@]}" "${kv[@]}" "${disagg[@]}" -id "decode-$i" -listen "127.0.0.1:$((BASE_PORT + 200 + i))"
done
for i in $(seq 0 $((PREFILL - 1))); do
  mapfile -t kv < <(tiers "prefill-$i")
  start "prefill-$i" bin/prefill "${common[@]}" "${worker[@]}" "${kv[@]}" -id "prefill-$i" -listen "127.0.0.1:$((BASE_PORT + 100 + i))"
done
for i in $(seq 0 $((ROUTERS - 1))); do
  start "router-$i" bin/router "${common[@]}" -id "router-$i" -mode "$ROUTER_MODE" "${disagg[@]}" ${ROUTER_ARGS:-} -listen "127.0.0.1:$((BASE_PORT + i))"
done
start kvbm-controller bin/kvbm-controller "${common[@]}" "${kvbm[@]}" -id kvbm-controller-0 -listen "127.0.0.1:$((BASE_PORT + 300))"
start planner bin/planner "${common[@]}" -id planner-0 -listen "127.0.0.1:$((BASE_PORT + 400))"
start frontend bin/frontend "${common[@]}" -id frontend-0 ${FRONTEND_ARGS:-} -listen "127.0.0.1:$PORT"

# Wait until every service answers its health endpoint.
for port in "${ports[@]}"; do
  wait_up 300 "127.0.0.1:$port (health)" healthy "$port"
done
cat <<MSG

Switchyard is up: OpenAI API at http://127.0.0.1:$PORT/v1  (Ctrl-C stops everything)
  curl http://127.0.0.1:$PORT/v1/models
  curl http://127.0.0.1:$PORT/v1/completions -H 'Content-Type: application/json' \\
       -d '{"model":"<id from /v1/models>","prompt":"Once upon a time","max_tokens":32}'
  buf curl --protocol grpc --http2-prior-knowledge http://127.0.0.1:$BASE_PORT/switchyard.mesh.v1.InfoService/GetInfo
MSG
wait -n "${pids[@]}" || true
echo "run: a process exited; stopping the rest (see $logs)"
