#!/usr/bin/env bash
# Starts the whole Switchyard mesh on loopback (called by `make run` after
# `make build`) and serves until Ctrl-C, then stops every process it started.
# It turns the settings below into a spec for bin/supervisor (written to
# the run's state directory as stack.json) and hands over to it: the
# supervisor starts every process, restarts one that crashes, serves the
# SupervisorService on BASE+600 (list, add and drain instances of the
# prefill and decode pools), and drains the stack in reverse order at
# Ctrl-C.
#
# Settings (environment, all optional):
#   MODEL        llama2.c checkpoint; empty = the built-in tiny-random model
#   TOKENIZER    tokenizer.bin for MODEL (default: found beside the model)
#   EXECUTOR     llama | sim
#   ENGINE       builtin (default: libs/engine, with EXECUTOR) | llamacpp (every
#                worker starts a llama.cpp llama-server child serving MODEL,
#                converted once to GGUF into the cache) | mixed (DECODE
#                built-in workers plus LLAMACPP_DECODE llama.cpp workers, on
#                BASE+250+i, of the same model). llama-server comes from
#                LLAMA_SERVER_BIN, else scripts/llamacpp.sh (built once);
#                ENGINE_SLOTS (default 4) slots a llama-server
#   PREFILL      number of prefill workers (0 = aggregated serving)
#   DECODE       number of decode workers
#   MAX_DECODE, MAX_PREFILL  the most instances the supervisor lets those
#                pools grow to through its API (default 8, or the start
#                count if higher)
#   ROUTERS      number of router replicas
#   ROUTER_MODE  kv | round-robin | random | least-loaded
#   DISCOVERY    file | consul (consul: a local dev agent is started too)
#   PORT         the frontend's port (OpenAI API)
#   BASE_PORT    first port of the internal services (default 9000): routers
#                BASE+i, prefill BASE+100+i, decode BASE+200+i,
#                kvbm-controller BASE+300, planner BASE+400, supervisor
#                BASE+600
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
#   PLANNER_PROFILE  a profile (bin/planner profile -worker URL -out FILE)
#                the planner plans with: with it, the planner scales the
#                decode (and prefill) pools through the supervisor to its
#                TTFT and ITL targets (PLANNER_ARGS: -ttft-target,
#                -itl-target, ...); without it, it observes only
#   WORKER_ARGS, ROUTER_ARGS, FRONTEND_ARGS, PLANNER_ARGS  extra flags for those services
#   PROM_TARGETS where to write the Prometheus file_sd target list of the
#                stack's services (default $TMPDIR/switchyard-prometheus-targets.json,
#                the path deploy/prometheus/local.yml reads; docs/observability.md)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BASE_PORT:=9000}" "${EXECUTOR:=llama}" "${PREFILL:=0}" "${DECODE:=1}" "${ROUTERS:=1}" "${ROUTER_MODE:=kv}" "${DISCOVERY:=file}" "${PORT:=8000}"
: "${ENGINE:=builtin}" "${LLAMACPP_DECODE:=1}" "${ENGINE_SLOTS:=4}"
die() { echo "run: $*" >&2; exit 2; }
for v in PREFILL DECODE ROUTERS PORT BASE_PORT LLAMACPP_DECODE ENGINE_SLOTS; do [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v=${!v}: want a number"; done
(( DECODE >= 1 )) || die "DECODE=$DECODE: at least one decode worker is needed"
(( ROUTERS >= 1 )) || die "ROUTERS=$ROUTERS: at least one router is needed"
[ -z "${MODEL:-}" ] || [ -f "$MODEL" ] || die "MODEL=$MODEL: no such file"
command -v curl >/dev/null || die "curl is needed for the health checks (apt-get install curl)"

# The mesh's ports are fixed: with one already taken (another mesh still
# running?) a service would fail to bind or, worse, the health checks below
# would be answered by someone else's. Refuse before starting anything.
b=$BASE_PORT
ports=($(seq $((b + 200)) $((b + 200 + DECODE - 1))) $(seq $b $((b + ROUTERS - 1))) $((b + 300)) $((b + 400)) "$PORT" $((b + 600)))
if (( PREFILL > 0 )); then ports+=($(seq $((b + 100)) $((b + 100 + PREFILL - 1)))); fi
[ "$ENGINE" = mixed ] && ports+=($(seq $((b + 250)) $((b + 250 + LLAMACPP_DECODE - 1))))
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
[ -x bin/supervisor ] || die "bin/supervisor is missing: run make run (it builds it)"

# JSON for the supervisor's spec.
js() { local s=$1; s=${s//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\n'/\\n}; s=${s//$'\t'/\\t}; printf '"%s"' "$s"; }
jarr() { local out="" a; for a in "$@"; do out+="${out:+,}$(js "$a")"; done; printf '[%s]' "$out"; }
pools=()
# pool NAME FIELDS COMMAND...: a pool of the spec (FIELDS: extra JSON members).
pool() { local name=$1 fields=$2; shift 2; pools+=("{\"name\":$(js "$name"),\"command\":$(jarr "$@")${fields:+,$fields}}"); }
health='"ready":{"http":"http://127.0.0.1:{port}/health","timeout":"60s"}'

common=(-discovery "$DISCOVERY")
if [ "$DISCOVERY" = consul ]; then
  consul=$(scripts/deps.sh | tail -2 | head -1)
  pool consul '"id":"consul","wait":true,"ready":{"http":"http://127.0.0.1:8500/v1/status/leader","contains":":","timeout":"20s"}' \
    "$consul" agent -dev -bind 127.0.0.1 -client 127.0.0.1 -log-level warn
  common+=(-consul-addr 127.0.0.1:8500)
  consul_msg="  consul dev agent at http://127.0.0.1:8500 (UI: /ui)"
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
s3_msg=""
if [ -n "${KVBM_S3:-}" ]; then
  bucket=${KVBM_S3_BUCKET:-switchyard-kv}
  if [ "$KVBM_S3" = local ]; then
    gw=$(scripts/deps.sh | tail -1)
    s3="http://127.0.0.1:$((BASE_PORT + 500))"
    export AWS_ACCESS_KEY_ID=switchyard-local AWS_SECRET_ACCESS_KEY=switchyard-local-secret
    mkdir -p "$state/s3"
    # Ready once the bucket exists: created on the first check (SigV4
    # through curl; S3 wants the empty body's hash), 409 once it is there.
    s3up="code=\$(curl -sS -o /dev/null -w '%{http_code}' --aws-sigv4 aws:amz:us-east-1:s3 --user \"\$AWS_ACCESS_KEY_ID:\$AWS_SECRET_ACCESS_KEY\" \
-H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' -X PUT $s3/$bucket) && { [ \"\$code\" = 200 ] || [ \"\$code\" = 409 ]; }"
    pool versitygw "\"id\":\"versitygw\",\"wait\":true,\"env\":[\"ROOT_ACCESS_KEY=$AWS_ACCESS_KEY_ID\",\"ROOT_SECRET_KEY=$AWS_SECRET_ACCESS_KEY\"],\"ready\":{\"exec\":$(jarr bash -c "$s3up"),\"timeout\":\"20s\"}" \
      "$gw" --port "127.0.0.1:$((BASE_PORT + 500))" --quiet posix "$state/s3"
    s3_msg="  local S3 store at $s3 (bucket $bucket, data in $state/s3)"
  else
    s3=$KVBM_S3
  fi
  (( tiers_on )) || die "KVBM_S3: a sim worker has no KV bytes to keep; set -sim-kv-bytes-per-token in WORKER_ARGS"
  worker+=(-kv-s3-endpoint "$s3" -kv-s3-bucket "$bucket")
  # The controller keeps the store's catalog and its budget
  # (KVBM_S3_CAPACITY, default 64GiB; 0: none).
  kvbm+=(-s3-endpoint "$s3" -s3-bucket "$bucket" -s3-capacity "${KVBM_S3_CAPACITY:-64GiB}")
fi
# The KV tier flags of a worker (its disk tier in a directory of its own).
tiers=()
if (( tiers_on )); then
  (( KV_HOST_BLOCKS > 0 )) && tiers+=(-kv-host-blocks "$KV_HOST_BLOCKS")
  (( KV_DISK_BLOCKS > 0 )) && tiers+=(-kv-disk-dir "$state/kv/{id}" -kv-disk-blocks "$KV_DISK_BLOCKS")
fi
[ -n "${MODEL:-}" ] && worker+=(-model "$MODEL")
[ -n "${TOKENIZER:-}" ] && worker+=(-tokenizer "$TOKENIZER")
disagg=()
(( PREFILL > 0 )) && disagg=(-disagg-threshold-tokens "${DISAGG_THRESHOLD:-64}")
: "${MAX_DECODE:=8}" "${MAX_PREFILL:=8}"
for v in MAX_DECODE MAX_PREFILL; do [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v=${!v}: want a number"; done
(( MAX_DECODE >= DECODE )) || MAX_DECODE=$DECODE
(( MAX_PREFILL >= PREFILL )) || MAX_PREFILL=$PREFILL

# llama.cpp workers: each starts llama-server on MODEL as GGUF, converted
# once into the cache (keyed by the checkpoint's contents), and keeps its
# KV itself (no tiers, no remote prefill).
llama=()
case "$ENGINE" in
  builtin) ;;
  llamacpp|mixed)
    [ -n "${MODEL:-}" ] || die "ENGINE=$ENGINE needs MODEL (a llama2.c checkpoint or a GGUF file)"
    (( PREFILL == 0 )) || die "PREFILL=$PREFILL: remote prefill needs ENGINE=builtin"
    bin_ls=${LLAMA_SERVER_BIN:-$(scripts/llamacpp.sh | tail -1)}
    tok=${TOKENIZER:-}
    if [ -z "$tok" ]; then
      for f in "$(dirname "$MODEL")"/tok*.bin "$(dirname "$MODEL")/tokenizer.bin"; do [ -f "$f" ] && { tok=$f; break; }; done
    fi
    [ -n "$tok" ] || [[ "$MODEL" == *.gguf ]] || die "ENGINE=$ENGINE: set TOKENIZER (the llama2.c tokenizer of MODEL, needed to convert it to GGUF)"
    gguf=$MODEL
    if [[ "$MODEL" != *.gguf ]]; then
      name=$(basename "${MODEL%.*}")
      gguf="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/gguf/$(sha256sum "$MODEL" | cut -c1-16)/$name.gguf"
      if [ ! -f "$gguf" ]; then
        echo "run: converting $MODEL to $gguf (once)"
        mkdir -p "$(dirname "$gguf")"
        go run ./libs/engine/cmd/llama2gguf -checkpoint "$MODEL" -tokenizer "$tok" -name "$name" -o "$gguf.tmp" && mv "$gguf.tmp" "$gguf"
      fi
    fi
    # A GGUF model carries its vocabulary and chat template, which the
    # worker ships to the frontend; TOKENIZER, when set, overrides them.
    llama=(-engine llamacpp -llama-server-bin "$bin_ls" -model "$gguf" -engine-slots "$ENGINE_SLOTS"
      -engine-log "$logs/llama-server-{id}.log" ${WORKER_ARGS:-})
    [ -n "${TOKENIZER:-}" ] && llama+=(-tokenizer "$TOKENIZER") ;;
  *) die "ENGINE=$ENGINE: want builtin, llamacpp or mixed" ;;
esac

listen='127.0.0.1:{port}'
if [ "$ENGINE" = llamacpp ]; then
  pool decode "\"count\":$DECODE,\"port\":$((BASE_PORT + 200)),\"scalable\":true,\"min\":1,\"max\":$MAX_DECODE,$health" \
    bin/decode "${common[@]}" "${llama[@]}" -id '{id}' -listen "$listen"
else
  pool decode "\"count\":$DECODE,\"port\":$((BASE_PORT + 200)),\"scalable\":true,\"min\":1,\"max\":$MAX_DECODE,$health" \
    bin/decode "${common[@]}" "${worker[@]}" "${tiers[@]}" "${disagg[@]}" -id '{id}' -listen "$listen"
fi
if [ "$ENGINE" = mixed ]; then
  pool decode-llamacpp "\"count\":$LLAMACPP_DECODE,\"port\":$((BASE_PORT + 250)),\"service\":\"decode\",$health" \
    bin/decode "${common[@]}" "${llama[@]}" -id '{id}' -listen "$listen"
fi
if (( PREFILL > 0 )); then
  pool prefill "\"count\":$PREFILL,\"port\":$((BASE_PORT + 100)),\"scalable\":true,\"min\":1,\"max\":$MAX_PREFILL,$health" \
    bin/prefill "${common[@]}" "${worker[@]}" "${tiers[@]}" -id '{id}' -listen "$listen"
fi
pool router "\"count\":$ROUTERS,\"port\":$BASE_PORT,$health" \
  bin/router "${common[@]}" -id '{id}' -mode "$ROUTER_MODE" "${disagg[@]}" ${ROUTER_ARGS:-} -listen "$listen"
pool kvbm-controller "\"port\":$((BASE_PORT + 300)),$health" \
  bin/kvbm-controller "${common[@]}" "${kvbm[@]}" -id '{id}' -listen "$listen"
# The planner scales the decode and prefill pools through the supervisor
# once it has a profile (PLANNER_PROFILE, from `bin/planner profile`);
# without one it observes and reports only.
planner=(-actuator supervisor -supervisor-url "http://127.0.0.1:$((BASE_PORT + 600))" -max-decode "$MAX_DECODE" -max-prefill "$MAX_PREFILL")
if [ -n "${PLANNER_PROFILE:-}" ]; then
  [ -f "$PLANNER_PROFILE" ] || die "PLANNER_PROFILE=$PLANNER_PROFILE: no such file"
  planner+=(-profile "$PLANNER_PROFILE")
fi
pool planner "\"port\":$((BASE_PORT + 400)),$health" \
  bin/planner "${common[@]}" "${planner[@]}" ${PLANNER_ARGS:-} -id '{id}' -listen "$listen"
# The frontend's console drains workers through the supervisor.
pool frontend "\"port\":$PORT,$health" \
  bin/frontend "${common[@]}" -id '{id}' -supervisor-url "http://127.0.0.1:$((BASE_PORT + 600))" ${FRONTEND_ARGS:-} -listen "$listen"

banner="
Switchyard is up: OpenAI API at http://127.0.0.1:$PORT/v1  (Ctrl-C stops everything)
  console: http://127.0.0.1:$PORT/console/  (bin/switchyard ctl instances; docs/console.md)
${consul_msg:-}${consul_msg:+
}${s3_msg}${s3_msg:+
}  curl http://127.0.0.1:$PORT/v1/models
  curl http://127.0.0.1:$PORT/v1/completions -H 'Content-Type: application/json' \\
       -d '{\"model\":\"<id from /v1/models>\",\"prompt\":\"Once upon a time\",\"max_tokens\":32}'
  buf curl --protocol grpc --http2-prior-knowledge http://127.0.0.1:$BASE_PORT/switchyard.mesh.v1.InfoService/GetInfo
  supervisor (list, add, drain instances): http://127.0.0.1:$((BASE_PORT + 600))/switchyard.supervisor.v1.SupervisorService/
"
# The supervisor keeps a Prometheus file_sd list of every instance,
# labelled service=<name> as Consul-discovered targets are, rewritten as
# pools scale (deploy/prometheus/local.yml reads it).
: "${PROM_TARGETS:=${TMPDIR:-/tmp}/switchyard-prometheus-targets.json}"
banner+="  Prometheus targets (file_sd): $PROM_TARGETS  (prometheus --config.file=deploy/prometheus/local.yml)
"
joined=$(IFS=,; echo "${pools[*]}")
printf '{"logs":%s,"stop_timeout":"30s","banner":%s,"prometheus_targets":%s,"pools":[%s]}\n' "$(js "$logs")" "$(js "$banner")" "$(js "$PROM_TARGETS")" "$joined" >"$state/stack.json"

echo "run: starting the mesh (state in $state)"
exec bin/supervisor -spec "$state/stack.json" -listen "127.0.0.1:$((BASE_PORT + 600))" -log-level warn
