#!/usr/bin/env bash
# Installs what tests and DISCOVERY=consul need, only when missing:
#   - Debian packages redis-server, libucx-dev, ucx-utils, pkg-config, fio,
#     prometheus (with promtool) and chromium with chromium-driver (the
#     console's browser test) (apt-get, as root);
#   - Consul v1.14.11 (MPL-2.0) and versitygw v1.8.0 (Apache-2.0, an S3
#     server for the object-store KV tier), built from source through the
#     `tool` directives of tools/consul and tools/versitygw into
#     $SWITCHYARD_CACHE (default ~/.cache/switchyard), never into the
#     repository.
# Prints the consul binary path, then the versitygw one, as its last lines.
#
# `scripts/deps.sh nomad` does none of that: it builds Nomad v1.6.3 (the
# last MPL-2.0 release; 1.7 and later are BUSL) from tools/nomad into the
# same cache when missing (~5.5 min cold on 2 cores) and prints its path as
# its one line: NOMAD_BIN=$(scripts/deps.sh nomad). Without the argument
# Nomad is not built, so the output above, and its cost, stay as they are
# for the callers that take `tail -1` (versitygw) and `tail -2 | head -1`
# (consul).
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}"

if [ "${1:-}" = nomad ]; then
  nomad="$cache/nomad-v1.6.3"
  if [ ! -x "$nomad" ]; then
    echo "deps: building Nomad v1.6.3 from source (first time only: ~1 GB of modules, several minutes)" >&2
    mkdir -p "$cache"
    (cd tools/nomad && GOWORK=off go build -ldflags "-s -w" -o "$nomad.tmp" github.com/hashicorp/nomad) >&2
    mv "$nomad.tmp" "$nomad"
  fi
  echo "$nomad"
  exit 0
elif [ $# -gt 0 ]; then
  echo "usage: $0 [nomad]" >&2
  exit 2
fi

consul="$cache/consul-v1.14.11"

need=()
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v redis-server >/dev/null || need+=(redis-server)
pkg-config --exists ucx 2>/dev/null || need+=(libucx-dev)
command -v ucx_perftest >/dev/null || need+=(ucx-utils)
command -v fio >/dev/null || need+=(fio) # the disk tier's baseline (libs/kvbm BenchmarkFio)
{ command -v prometheus && command -v promtool; } >/dev/null || need+=(prometheus) # deploy/prometheus rule tests, tests/e2e scrape test
command -v chromium >/dev/null || need+=(chromium) # tests/e2e console browser test (CHROMIUM_BIN)
command -v chromedriver >/dev/null || need+=(chromium-driver)
if ((${#need[@]})); then
  echo "deps: installing ${need[*]}" >&2
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >&2
fi

if [ ! -x "$consul" ]; then
  echo "deps: building Consul v1.14.11 from source (first time only: ~2 GB of modules, several minutes)" >&2
  mkdir -p "$cache"
  (cd tools/consul && GOWORK=off go build -ldflags "-s -w" -o "$consul.tmp" github.com/hashicorp/consul) >&2
  mv "$consul.tmp" "$consul"
fi
versitygw="$cache/versitygw-v1.8.0"
if [ ! -x "$versitygw" ]; then
  echo "deps: building versitygw v1.8.0 from source (first time only, a few minutes)" >&2
  mkdir -p "$cache"
  (cd tools/versitygw && GOWORK=off go build -ldflags "-s -w" -o "$versitygw.tmp" github.com/versity/versitygw/cmd/versitygw) >&2
  mv "$versitygw.tmp" "$versitygw"
fi
echo "$consul"
echo "$versitygw"
