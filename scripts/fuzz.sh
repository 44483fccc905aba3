#!/usr/bin/env bash
# Runs every fuzz target in the workspace for the given time each.
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-10s}"
for m in $(scripts/modules.sh mods); do
  for pkg in $(cd "$m" && go list ./...); do
    dir=$(cd "$m" && go list -f '{{.Dir}}' "$pkg")
    for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/func //'); do
      echo "== $pkg $f ($t)"
      go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$pkg"
    done
  done
done
