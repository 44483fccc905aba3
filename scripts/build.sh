#!/usr/bin/env bash
# Builds the named services into bin/, stamping each with its own version:
# services/<svc>/VERSION plus the commit, e.g. 0.1.0+3f2a9c1.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit-dirty"
mkdir -p bin
for svc in "$@"; do
  ver="$(cat services/$svc/VERSION)+$commit"
  go build -ldflags "-X main.version=$ver" -o bin/$svc ./services/$svc/cmd/$svc
done
