#!/usr/bin/env bash
# buf, offline: the binaries come from the pinned `tool` directives of
# tools/buf/go.mod, built into bin/.
#   buf.sh generate  regenerate gen/ from proto/
#   buf.sh check     lint; fail if gen/ is stale; fail on a breaking change
#                    (WIRE_JSON) against the previous commit that had proto/
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
if [ ! -x bin/buf ] || [ ! -x bin/protoc-gen-go ] || [ ! -x bin/protoc-gen-connect-go ] || [ tools/buf/go.mod -nt bin/buf ]; then
  (cd tools/buf && GOWORK=off go build -o ../../bin/ github.com/bufbuild/buf/cmd/buf \
    connectrpc.com/connect/cmd/protoc-gen-connect-go google.golang.org/protobuf/cmd/protoc-gen-go)
fi

generate() { bin/buf generate "$@"; }

check() {
  echo "buf: lint"
  bin/buf lint
  echo "buf: generated code up to date"
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  generate --output "$tmp"
  if ! diff -r -q -x go.mod -x go.sum "$tmp/gen" gen >/dev/null 2>&1; then
    diff -r -x go.mod -x go.sum "$tmp/gen" gen | head -40 >&2 || true
    echo "buf: gen/ is stale: run 'make generate' and commit" >&2
    exit 1
  fi
  base=""
  if git rev-parse -q --verify HEAD~1 >/dev/null && git cat-file -e HEAD~1:proto 2>/dev/null; then
    base=HEAD~1
  fi
  if [ -n "$base" ]; then
    echo "buf: breaking (WIRE_JSON) against $(git rev-parse --short $base)"
    bin/buf breaking --against ".git#ref=$(git rev-parse $base)"
  else
    echo "buf: breaking: no previous commit with proto/, nothing to compare"
  fi
}

case "${1:-}" in
  generate) shift; generate "$@" ;;
  check) check ;;
  *) echo "usage: $0 generate|check" >&2; exit 2 ;;
esac
