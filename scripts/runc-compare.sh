#!/usr/bin/env bash
# `make runc-compare`: single-stream greedy decode on stories260K, llama2.c
# run.c against our pure-Go executor (libs/engine/llama), same workload: run.c
# -t 0 -n RUNC_STEPS -i RUNC_PROMPT, and BenchmarkRunCWorkload, which mirrors
# run.c's loop and its "achieved tok/s" (see that benchmark's comment). Each
# round runs run.c (gcc -O3), ours (simd and go kernels, one generation per
# process, GOMAXPROCS=1) and run.c (gcc -Ofast -march=native), one after the
# other; medians and ranges are reported. Fails when our text differs from
# run.c -O3's.
# Offline; needs gcc, go, third_party/llama2.c/run.c (see its README) and
# ../shared/models/stories260K. See docs/benchmarks.md.
#
#   RUNC_PROMPT  prompt (default "Once upon a time")
#   RUNC_STEPS   positions, BOS and prompt included (default 256; seq_len 512)
#   RUNC_ROUNDS  rounds (default 9; a shared machine needs them)
#   RUNC_SRC     run.c to build (default third_party/llama2.c/run.c)
#   RUNC_ANY=1   accept a run.c whose sha256 is not the pinned one
set -euo pipefail
cd "$(dirname "$0")/.."
: "${RUNC_PROMPT:=Once upon a time}" "${RUNC_STEPS:=256}" "${RUNC_ROUNDS:=9}" "${RUNC_SRC:=third_party/llama2.c/run.c}"
pinned=9af3a7e37f0d6b1c864cb35b4c71e7bac4b4d2253e0b921084a6e252108dfb07
die() { echo "runc-compare: $*" >&2; exit 2; }
for v in RUNC_STEPS RUNC_ROUNDS; do [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "$v=${!v}: want a positive number"; done
[ -f "$RUNC_SRC" ] || die "$RUNC_SRC: no such file; see third_party/llama2.c/README.md for where to get run.c"
sum=$(sha256sum "$RUNC_SRC" | cut -d' ' -f1)
[ "$sum" = "$pinned" ] || [ "${RUNC_ANY:-}" = 1 ] || die "$RUNC_SRC: sha256 $sum is not the pinned $pinned (RUNC_ANY=1 to use it anyway)"

model=""
for d in . .. ../..; do
  [ -f "$d/shared/models/stories260K/stories260K.bin" ] && { model="$(cd "$d/shared/models/stories260K" && pwd)"; break; }
done
[ -n "$model" ] || die "stories260K not found (expected ../shared/models/stories260K from the repository root)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O3 -o "$tmp/runc-O3" "$RUNC_SRC" -lm
gcc -Ofast -march=native -o "$tmp/runc-Ofast" "$RUNC_SRC" -lm
(cd libs/engine && go test -c -o "$tmp/llama.test" ./llama)

# runc BIN OUT: one run.c generation; prints its achieved tok/s.
runc() {
  "$1" "$model/stories260K.bin" -z "$model/tok512.bin" -t 0 -n "$RUNC_STEPS" -i "$RUNC_PROMPT" >"$2" 2>"$tmp/err" ||
    { cat "$tmp/err" >&2; die "$1 failed"; }
  sed -n 's/^achieved tok\/s: //p' "$tmp/err"
}
# ours: one generation per kernel; prints "simd-tok/s go-tok/s".
ours() {
  mkdir -p "$tmp/ours"
  (cd libs/engine/llama && "$tmp/llama.test" -test.run '^$' -test.bench '^BenchmarkRunCWorkload$' -test.benchtime 1x -test.cpu 1 \
    -runc.prompt "$RUNC_PROMPT" -runc.steps "$RUNC_STEPS" -runc.out "$tmp/ours") >"$tmp/bench" 2>&1 ||
    { cat "$tmp/bench" >&2; die "BenchmarkRunCWorkload failed"; }
  awk '/^BenchmarkRunCWorkload\// { for (i = 2; i < NF; i++) if ($(i+1) == "tok/s") v[$1] = $i }
       END { printf "%s %s\n", v["BenchmarkRunCWorkload/simd"], v["BenchmarkRunCWorkload/go"] }' "$tmp/bench"
}
# stats: "median min max" of the numbers on stdin.
stats() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { m = NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2; print m, a[1], a[NR] }'; }

echo "workload: stories260K, run.c -t 0 -n $RUNC_STEPS -i \"$RUNC_PROMPT\"; ours: BenchmarkRunCWorkload, GOMAXPROCS=1"
echo "machine:  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; $(gcc --version | head -1); $(go version | cut -d' ' -f3)"
echo "load average before: $(uptime | sed 's/.*load average: //')"
o3="" fast="" simd="" gok=""
for r in $(seq "$RUNC_ROUNDS"); do
  a=$(runc "$tmp/runc-O3" "$tmp/runc-O3.txt")
  read -r s g < <(ours)
  f=$(runc "$tmp/runc-Ofast" "$tmp/runc-Ofast.txt")
  [ -n "$a" ] && [ -n "$s" ] && [ -n "$g" ] && [ -n "$f" ] || die "round $r: a tok/s figure is missing (too few steps?)"
  printf 'round %d: run.c -O3 %8.0f   ours simd %8.0f   ours go %8.0f   run.c -Ofast -march=native %8.0f tok/s\n' "$r" "$a" "$s" "$g" "$f"
  o3+=" $a" simd+=" $s" gok+=" $g" fast+=" $f"
done
echo "load average after:  $(uptime | sed 's/.*load average: //')"

echo
echo "--- run.c (gcc -O3) text:"
cat "$tmp/runc-O3.txt"
echo "--- ours (simd) text:"
cat "$tmp/ours/simd.txt"
same=yes
for k in simd go; do
  cmp -s "$tmp/runc-O3.txt" "$tmp/ours/$k.txt" || { same=no; echo "ours ($k) text differs from run.c -O3:"; diff "$tmp/runc-O3.txt" "$tmp/ours/$k.txt" || true; }
done
fastsame=yes
cmp -s "$tmp/runc-O3.txt" "$tmp/runc-Ofast.txt" || fastsame=no

echo
echo "tok/s, median (min-max) of $RUNC_ROUNDS rounds; run.c's 'achieved tok/s' has a 1 ms clock:"
read -r m3 l3 h3 <<<"$(stats <<<"$o3")"
read -r ms ls hs <<<"$(stats <<<"$simd")"
read -r mg lg hg <<<"$(stats <<<"$gok")"
read -r mf lf hf <<<"$(stats <<<"$fast")"
printf '  run.c, gcc -O3                  %6.0f (%5.0f-%5.0f)\n' "$m3" "$l3" "$h3"
printf '  ours, simd kernel               %6.0f (%5.0f-%5.0f)  %.2fx run.c -O3\n' "$ms" "$ls" "$hs" "$(awk "BEGIN{print $ms/$m3}")"
printf '  ours, plain-Go kernel           %6.0f (%5.0f-%5.0f)  %.2fx run.c -O3\n' "$mg" "$lg" "$hg" "$(awk "BEGIN{print $mg/$m3}")"
printf '  secondary: run.c, gcc -Ofast -march=native\n'
printf '                                  %6.0f (%5.0f-%5.0f)  ours simd %.2fx of it; same text as -O3: %s\n' "$mf" "$lf" "$hf" "$(awk "BEGIN{print $ms/$mf}")" "$fastsame"
echo "text: ours (simd and go) byte-identical to run.c -O3: $same"
[ "$same" = yes ] || exit 1
