#!/usr/bin/env bash
# A local Nomad deployment of Switchyard, the way a cluster runs it
# (`make nomad-up`, `make nomad-down`):
#
#   scripts/nomad-local.sh up     release archives, Consul and Nomad dev
#                                 agents on loopback, an artifact server,
#                                 every service's job; prints the frontend
#   scripts/nomad-local.sh down   stops the jobs, the agents and the server
#
# Everything lives under NOMAD_LOCAL_DIR (default
# ~/.cache/switchyard/nomad-local): the release in dist/, the agents' data
# and logs, pid files, the frontend's API key in api-key, the mesh
# certificates in certs/. The agents are
# dev agents (one node, state kept in memory), so `down` then `up` starts
# from scratch. Settings (environment, all optional):
#   MODEL, TOKENIZER  llama2.c checkpoint and tokenizer for prefill and
#                decode (default: ../shared/models/stories260K when present,
#                else the built-in tiny random model)
#   NOMAD_LOCAL_PORT  first of the ports used (default 18000): Consul HTTP
#                +500, Nomad HTTP +646 (+647 RPC, +648 serf), the artifact
#                server +80; Consul's other ports +300..+306
#   NO_RELEASE=1 deploy the archives already in dist/
#   TLS=false    the services talk plaintext h2c (default: mutual TLS, with
#                a CA and one certificate for 127.0.0.1 made in certs/ and
#                stored in the Nomad Variable nomad/jobs)
#   NOMAD_BIN, CONSUL_BIN  the binaries (default: the cached builds of
#                scripts/deps.sh)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dir=${NOMAD_LOCAL_DIR:-$HOME/.cache/switchyard/nomad-local}
cache=$HOME/.cache/switchyard
p=${NOMAD_LOCAL_PORT:-18000}
consul_addr=127.0.0.1:$((p + 500))
export NOMAD_ADDR=http://127.0.0.1:$((p + 646))
art=http://127.0.0.1:$((p + 80))
services=(decode prefill router kvbm-controller planner frontend)

log() { printf 'nomad-local: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# running NAME: the pid in NAME.pid is alive.
running() { [ -f "$dir/$1.pid" ] && kill -0 "$(cat "$dir/$1.pid")" 2>/dev/null; }

# start NAME LOG CMD...: runs CMD in its own session, in the background.
start() {
  local name=$1 logf=$2
  shift 2
  setsid "$@" >"$logf" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}

# wait_for WHAT SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
  local what=$1 secs=$2
  shift 2
  for _ in $(seq $((secs * 5))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  die "$what not ready within ${secs}s (logs in $dir)"
}

# stop NAME SECONDS [SIGNAL]: SIGNAL (default INT), then SIGKILL after
# SECONDS. A background job of a script starts with SIGINT ignored: the
# Go agents take it back, python's http.server needs TERM.
stop() {
  local name=$1 secs=$2 sig=${3:-INT} pid
  running "$name" || { rm -f "$dir/$name.pid"; return 0; }
  pid=$(cat "$dir/$name.pid")
  kill -"$sig" "$pid"
  for _ in $(seq $((secs * 5))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name did not exit within ${secs}s; killing it"
    kill -KILL "$pid"
  fi
  rm -f "$dir/$name.pid"
}

binaries() {
  nomad=${NOMAD_BIN:-}
  [ -n "$nomad" ] || nomad=$(command -v nomad || true)
  [ -n "$nomad" ] || nomad=$(scripts/deps.sh nomad)
  consul=${CONSUL_BIN:-}
  [ -n "$consul" ] || consul=$(command -v consul || true)
  [ -n "$consul" ] || consul=$cache/consul-v1.14.11
  [ -x "$consul" ] || die "no consul binary (CONSUL_BIN, PATH or $cache): run make deps"
  export NOMAD_BIN=$nomad
}

nomad_node_ready() {
  "$nomad" node status -self -short 2>/dev/null | grep -q '^Status *= ready'
}

up() {
  mkdir -p "$dir"
  for n in nomad consul artifacts; do
    running "$n" && die "$n already running (pid $(cat "$dir/$n.pid")): make nomad-down first"
  done
  binaries
  # An agent left from an earlier run would answer in place of the new
  # one (which fails to bind) and outlive the next nomad-down.
  for a in "http://$consul_addr/v1/status/leader" "$NOMAD_ADDR/v1/status/leader" "$art/"; do
    if curl -fsS -o /dev/null --max-time 2 "$a" 2>/dev/null; then
      die "${a%/v1/*} already answers (a leftover agent or server?): stop it first"
    fi
  done
  local t0=$SECONDS
  if [ -z "${NO_RELEASE:-}" ]; then
    log "building the release archives into $dir/dist"
    go run ./cmd/release -out "$dir/dist" >/dev/null
    log "release built in $((SECONDS - t0))s"
  fi
  local t1=$SECONDS
  [ -r "$dir/dist/SHA256SUMS" ] || die "$dir/dist/SHA256SUMS missing: run without NO_RELEASE"

  log "starting Consul on $consul_addr"
  start consul "$dir/consul.log" "$consul" agent -dev -bind 127.0.0.1 -client 127.0.0.1 -node switchyard-local \
    -log-level warn -http-port $((p + 500)) -grpc-port $((p + 302)) -grpc-tls-port $((p + 303)) \
    -serf-lan-port $((p + 301)) -serf-wan-port $((p + 304)) -server-port $((p + 300)) -dns-port $((p + 306))
  wait_for "Consul" 30 sh -c "curl -fsS http://$consul_addr/v1/status/leader | grep -q :"

  log "starting Nomad on $NOMAD_ADDR"
  mkdir -p "$dir/nomad"
  cat >"$dir/nomad.hcl" <<EOF
name      = "switchyard-local"
data_dir  = "$dir/nomad"
log_level = "INFO"
ports {
  http = $((p + 646))
  rpc  = $((p + 647))
  serf = $((p + 648))
}
consul {
  address = "$consul_addr"
}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
EOF
  start nomad "$dir/nomad.log" "$nomad" agent -dev -bind 127.0.0.1 -config "$dir/nomad.hcl"
  wait_for "Nomad" 60 nomad_node_ready

  log "serving $dir/dist at $art"
  start artifacts "$dir/artifacts.log" python3 -m http.server --bind 127.0.0.1 --directory "$dir/dist" $((p + 80))
  wait_for "the artifact server" 10 curl -fsS -o /dev/null "$art/SHA256SUMS"

  local model=${MODEL:-} tok=${TOKENIZER:-}
  if [ -z "$model" ] && [ -f ../shared/models/stories260K/stories260K.bin ]; then
    model=$(cd ../shared/models/stories260K && pwd)/stories260K.bin
    tok=$(dirname "$model")/tok512.bin
  fi
  local key
  key=sk-local-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
  echo "$key" >"$dir/api-key"
  "$nomad" var put -force nomad/jobs/switchyard-frontend api_keys="$key name=local" >/dev/null

  local tls=${TLS:-true} scheme=http curlca=()
  if [ "$tls" = true ]; then
    # One certificate for every service: in a dev agent they all
    # advertise 127.0.0.1. The frontend's OpenAI API serves it too.
    log "making the mesh certificates in $dir/certs"
    (cd libs/mesh && go run ./cmd/switchyard-certs -dir "$dir/certs" -names mesh) >/dev/null
    "$nomad" var put -force nomad/jobs tls_ca=@"$dir/certs/ca.crt" \
      tls_cert=@"$dir/certs/mesh.crt" tls_key=@"$dir/certs/mesh.key" >/dev/null
    scheme=https curlca=(--cacert "$dir/certs/ca.crt")
  fi

  for svc in "${services[@]}"; do
    log "deploying $svc"
    scripts/nomad-deploy.sh "$svc" "$art" "$dir/dist/SHA256SUMS" -detach -var tls="$tls" \
      -var consul_addr="$consul_addr" -var count=1 -var cpu=100 -var memory=256 \
      -var min_healthy_time=2s -var model="$model" -var tokenizer="$tok" >/dev/null
  done

  log "waiting for the frontend"
  local front=""
  for _ in $(seq 600); do
    front=$(curl -fsS "http://$consul_addr/v1/health/service/switchyard-frontend?passing" 2>/dev/null |
      python3 -c 'import json,sys; e=json.load(sys.stdin); print("%s:%d" % (e[0]["Service"]["Address"], e[0]["Service"]["Port"]) if e else "")' 2>/dev/null || true)
    if [ -n "$front" ] && curl -fsS "${curlca[@]}" -H "Authorization: Bearer $key" "$scheme://$front/v1/models" 2>/dev/null | grep -q '"id"'; then
      break
    fi
    front=""
    sleep 0.2
  done
  [ -n "$front" ] || die "the frontend did not answer /v1/models within 120s: nomad job status; logs: nomad alloc logs -job switchyard-frontend"
  local models
  models=$(curl -fsS "${curlca[@]}" -H "Authorization: Bearer $key" "$scheme://$front/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
  wait_for "a completion" 60 curl -fsS "${curlca[@]}" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d "{\"model\":\"$models\",\"prompt\":\"Once upon a time\",\"max_tokens\":8}" "$scheme://$front/v1/completions"
  echo "$front" >"$dir/frontend"
  cat <<EOF
Switchyard on Nomad: first completion answered $((SECONDS - t0))s after start ($((SECONDS - t1))s after the release).
  frontend  $scheme://$front/v1   (API key: $key, also in $dir/api-key)
  nomad     $NOMAD_ADDR   (export NOMAD_ADDR=$NOMAD_ADDR; nomad job status)
  consul    http://$consul_addr
  try: curl ${curlca[*]} -H "Authorization: Bearer $key" $scheme://$front/v1/models
EOF
}

down() {
  binaries
  if running nomad; then
    for svc in "${services[@]}"; do
      "$nomad" job stop -purge -detach "switchyard-$svc" >/dev/null 2>&1 || true
    done
  fi
  # Nomad before Consul: the other order makes Nomad's exit take ~48 s.
  # SIGINT makes the dev agent stop its allocations before it exits.
  stop nomad 60
  stop artifacts 5 TERM
  stop consul 30
  if curl -fsS -o /dev/null --max-time 2 "http://$consul_addr/v1/status/leader" 2>/dev/null; then
    die "a Consul still answers on $consul_addr, not started by this state directory"
  fi
  log "stopped (state in $dir)"
}

case ${1:-} in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
