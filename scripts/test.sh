#!/usr/bin/env bash
# The one test command (`make test`, called by .ci/run). It installs what is
# missing (scripts/deps.sh), then: gofmt, go vet, golangci-lint, buf checks, every module
# building alone (GOWORK=off), all tests with -race (integration tests start a
# real Consul and redis-server on free loopback ports), and every benchmark
# once so none rots. Any failure fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
export UCX_NET_DEVICES="${UCX_NET_DEVICES:-lo}"
# A test that needs ../shared fails here instead of skipping (libs/sharedtest).
export SWITCHYARD_REQUIRE_SHARED=1
start=$(date +%s)
step() { printf '\n== %s (%ds)\n' "$*" "$(( $(date +%s) - start ))"; }

step "dependencies"
mapfile -t bins < <(scripts/deps.sh | tail -2)
CONSUL_BIN=${bins[0]} VERSITYGW_BIN=${bins[1]}
NOMAD_BIN=$(scripts/deps.sh nomad)
LLAMA_SERVER_BIN=$(scripts/llamacpp.sh | tail -1)
LLAMACPP_TESTDATA=$(scripts/llamacpp.sh testdata | tail -1)
REDIS_BIN=$(command -v redis-server)
PROMETHEUS_BIN=$(command -v prometheus) PROMTOOL_BIN=$(command -v promtool)
CHROMIUM_BIN=$(command -v chromium)
export CONSUL_BIN REDIS_BIN VERSITYGW_BIN NOMAD_BIN LLAMA_SERVER_BIN LLAMACPP_TESTDATA PROMETHEUS_BIN PROMTOOL_BIN CHROMIUM_BIN
echo "consul:    $CONSUL_BIN"; echo "redis:     $REDIS_BIN"; echo "versitygw: $VERSITYGW_BIN"; echo "nomad:     $NOMAD_BIN"
echo "prometheus: $PROMETHEUS_BIN"; echo "promtool:  $PROMTOOL_BIN"; echo "chromium:  $CHROMIUM_BIN"
echo "llama-server: $LLAMA_SERVER_BIN"; echo "llama.cpp test data: $LLAMACPP_TESTDATA"

mapfile -t mods < <(scripts/modules.sh mods)
mapfile -t pkgs < <(scripts/modules.sh pkgs)

step "gofmt"
bad=$(git ls-files -co --exclude-standard '*.go' | xargs -r gofmt -l)
if [ -n "$bad" ]; then echo "gofmt would change:"; echo "$bad"; exit 1; fi

step "go vet"
go vet "${pkgs[@]}"

step "golangci-lint (.golangci.yml)"
scripts/lint.sh

step "buf lint, generated code, breaking"
scripts/buf.sh check

step "each module builds alone (GOWORK=off)"
for m in "${mods[@]}"; do
  (cd "$m" && GOWORK=off go build ./... ) || { echo "module $m does not build alone"; exit 1; }
done

step "tests (-race; real Consul and Redis)"
go test -race -count=1 -timeout 25m "${pkgs[@]}"

# The UCX backend of libs/nixl is cgo behind the `ucx` build tag (libucx-dev
# from deps.sh); the packages below are built and tested with it too.
ucx_pkgs=(./libs/nixl/... ./libs/worker/disagg/...)
step "tests with -tags ucx (real UCX over loopback tcp and shared memory)"
go vet -tags ucx "${ucx_pkgs[@]}"
# Debian's libucx (1.13, built with assertions) can abort on its own
# internal assertion when a peer closes mid-rendezvous over tcp (a double
# completion in uct's tcp transport, "uct_iface.h ... comp->count > 0";
# upstream fixed flush/discard races of this kind after 1.13, see
# docs/development.md, with a second such assertion seen). That signature
# alone, an abort inside libucs with its backtrace, is rerun, at most twice,
# and said loudly; any other failure, or the abort three times, fails the
# run.
ucx_log=$(mktemp)
trap 'rm -f "$ucx_log"' EXIT
ucx_test() { go test -race -count=1 -tags ucx -timeout 10m "${ucx_pkgs[@]}" 2>&1 | tee "$ucx_log"; return "${PIPESTATUS[0]}"; }
for attempt in 1 2 3; do
  ucx_test && break
  if [ "$attempt" -lt 3 ] && grep -q "Assertion .* failed" "$ucx_log" && grep -q "libucs.so.*ucs_fatal_error" "$ucx_log"; then
    echo "!! UCX aborted on an internal assertion (upstream, above); rerunning the UCX tests"
  else
    exit 1
  fi
done

step "benchmarks, one iteration each"
go test -run '^$' -bench . -benchtime 1x -count=1 -timeout 15m "${pkgs[@]}"
go test -run '^$' -bench . -benchtime 1x -count=1 -timeout 5m -tags ucx "${ucx_pkgs[@]}"

step "done"
