#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` into $SWITCHYARD_CACHE (default
# ~/.cache/switchyard) when missing, and prints its path as its last line:
# LLAMA_SERVER_BIN=$(scripts/llamacpp.sh | tail -1).
#
# llama.cpp has no Debian package; the npm package node-llama-cpp ships
# its whole source tree as a git bundle (package/llama/gitRelease.bundle),
# which is what this builds, pinned by the package's exact version. cmake
# comes from Debian. The build is portable (GGML_NATIVE=OFF), static, and
# takes ~6 minutes on an idle 2-core machine, once.
#
# `scripts/llamacpp.sh testdata` builds nothing: it keeps the parts of the
# same tree that tests read as a peer's reference (models/ggml-vocab-*,
# the tokenizer test vectors beside them, models/templates/ and
# tests/test-chat-template.cpp) in $SWITCHYARD_CACHE/llamacpp-testdata-<v>
# and prints that directory as its last line:
# LLAMACPP_TESTDATA=$(scripts/llamacpp.sh testdata | tail -1).
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}"
pkg=node-llama-cpp@3.21.1
bin="$cache/llama-server-${pkg#*@}"

# fetch_tree clones the package's llama.cpp tree into $1/src.
fetch_tree() {
  (
    cd "$1"
    npm pack --silent "$pkg" >/dev/null
    tar -xzf node-llama-cpp-*.tgz package/llama/gitRelease.bundle
    git clone -q package/llama/gitRelease.bundle src 2>/dev/null
  )
}

if [ "${1:-}" = testdata ]; then
  data="$cache/llamacpp-testdata-${pkg#*@}"
  if [ ! -d "$data" ]; then
    echo "llamacpp: extracting llama.cpp's tokenizer and chat-template test data from $pkg (first time only)" >&2
    mkdir -p "$cache"
    work=$(mktemp -d "$cache/llamacpp.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    fetch_tree "$work" >&2
    mkdir -p "$work/data/models" "$work/data/tests"
    cp "$work"/src/models/ggml-vocab-* "$work/data/models/"
    cp -r "$work/src/models/templates" "$work/data/models/"
    cp "$work/src/tests/test-chat-template.cpp" "$work/data/tests/"
    mv "$work/data" "$data"
  fi
  echo "$data"
  exit 0
elif [ $# -gt 0 ]; then
  echo "usage: $0 [testdata]" >&2
  exit 2
fi

if [ ! -x "$bin" ]; then
  command -v cmake >/dev/null || {
    echo "llamacpp: installing cmake" >&2
    sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq cmake >&2
  }
  echo "llamacpp: building llama-server from $pkg (first time only, several minutes)" >&2
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/llamacpp.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  (
    fetch_tree "$work"
    cd "$work"
    cmake -S src -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF \
      -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null
    cmake --build build -j "$(nproc)" --target llama-server >/dev/null
    cp build/bin/llama-server "$bin.tmp"
  ) >&2
  mv "$bin.tmp" "$bin"
fi
echo "$bin"
