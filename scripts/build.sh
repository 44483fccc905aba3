#!/usr/bin/env bash
# Builds the named services into bin/, stamping each with its own version:
# services/<svc>/VERSION plus the commit, e.g. 0.1.0+3f2a9c1. The name
# "switchyard" builds the single binary (cmd/switchyard), which hosts every
# service and carries each one's version; "supervisor" the local stack's
# supervisor (cmd/supervisor).
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit-dirty"
services=(frontend router prefill decode kvbm-controller planner)
stamp() { echo "-X switchyard.dev/services/$1.Version=$(cat "services/$1/VERSION")+$commit"; }
mkdir -p bin
for name in "$@"; do
  if [ "$name" = supervisor ]; then # the local stack's supervisor (make run)
    go build -o bin/supervisor ./cmd/supervisor
  elif [ "$name" = switchyard ]; then
    ldflags=""
    for svc in "${services[@]}"; do ldflags+="$(stamp "$svc") "; done
    go build -ldflags "$ldflags" -o bin/switchyard ./cmd/switchyard
  else
    go build -ldflags "$(stamp "$name")" -o "bin/$name" "./services/$name/cmd/$name"
  fi
done
