#!/usr/bin/env bash
# Runs golangci-lint, pinned by the `tool` directive of
# tools/golangci-lint/go.mod and built once into $SWITCHYARD_CACHE (default
# ~/.cache/switchyard), over every module of go.work with .golangci.yml;
# then the packages behind the `ucx` build tag again with the tag.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}"
version=$(awk '$1 == "github.com/golangci/golangci-lint/v2" {print $2}' tools/golangci-lint/go.mod)
lint="$cache/golangci-lint-$version"
if [ ! -x "$lint" ]; then
  echo "lint: building golangci-lint $version (first time only)" >&2
  mkdir -p "$cache"
  (cd tools/golangci-lint && GOWORK=off go build -o "$lint.tmp" github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
  mv "$lint.tmp" "$lint"
fi
mapfile -t pkgs < <(scripts/modules.sh pkgs)
"$lint" run "${pkgs[@]}"
"$lint" run --build-tags ucx ./libs/nixl/... ./libs/worker/disagg/...
