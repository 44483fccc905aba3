#!/usr/bin/env bash
# Lists the workspace's modules (from go.work), or their package patterns.
set -euo pipefail
cd "$(dirname "$0")/.."
mods=$(awk '/^use \(/{f=1;next} f&&/^\)/{f=0} f{gsub(/[ \t]/,""); print}' go.work)
case "${1:-mods}" in
  mods) echo "$mods" ;;
  pkgs) for m in $mods; do echo "$m/..."; done ;;
  *) echo "usage: $0 [mods|pkgs]" >&2; exit 2 ;;
esac
