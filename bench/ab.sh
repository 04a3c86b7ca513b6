#!/usr/bin/env bash
# A/B of two agentpay binaries on bench/wallet_vs_nginx.sh: runs alternate between them (A B B A A B
# ...), so drift of the machine over the session falls on both alike, and each run's figures are
# ratios against the nginx baseline measured in that same run. Prints every run and, per binary, the
# median of paid/nginx proxy_pass, replay/nginx static, the store's ms/commit and the store writer's
# CPU us per paid request; then B's medians over A's.
#
# Usage: bench/ab.sh A_BIN B_BIN [RUNS_EACH]     (RUNS_EACH default 5; every wallet_vs_nginx.sh
#        setting, e.g. BENCH_DURATION, passes through; BENCH_FLOOR defaults to 0 here)
# Exit status: 0 when every run passed its own checks; 1 when a run failed (its output is shown);
# 2 on a usage error. Whether B is slower is for the reader to judge from the medians and the spread.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { echo "usage: bench/ab.sh A_BIN B_BIN [RUNS_EACH]" >&2; exit 2; }
[[ $# -ge 2 && $# -le 3 ]] || usage
A_BIN=$1
B_BIN=$2
RUNS=${3:-5}
[[ -x $A_BIN ]] || { echo "ab: $A_BIN is not an executable" >&2; exit 2; }
[[ -x $B_BIN ]] || { echo "ab: $B_BIN is not an executable" >&2; exit 2; }
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "ab: RUNS_EACH must be a positive integer" >&2; exit 2; }

# A private copy of each, so a rebuild during the session does not change what is measured.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/agentpay-ab.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cp "$A_BIN" "$WORK/A"
cp "$B_BIN" "$WORK/B"

order=()
for ((i = 0; i < RUNS; i++)); do
  if ((i % 2 == 0)); then order+=(A B); else order+=(B A); fi
done

declare -A paid replay commit writer
failed=0
printf '%-4s %-6s %10s %12s %10s %10s\n' run binary paid/proxy replay/static ms/commit writer-us
n=0
for which in "${order[@]}"; do
  n=$((n + 1))
  out="$WORK/run$n.txt"
  # No floor here: the A/B compares the two binaries; errors and money checks still fail a run.
  if ! AGENTPAY_BIN="$WORK/$which" BENCH_FLOOR=${BENCH_FLOOR:-0} "$BENCH_DIR/wallet_vs_nginx.sh" \
    >"$out" 2>"$WORK/run$n.err"; then
    echo "ab: run $n ($which) failed:" >&2
    cat "$out" "$WORK/run$n.err" >&2
    failed=1
    continue
  fi
  p=$(sed -n 's/^BENCH_SUMMARY .* paid_ratio=\([0-9.]*\).*/\1/p' "$out")
  r=$(sed -n 's/^BENCH_SUMMARY .* replay_ratio=\([0-9.]*\).*/\1/p' "$out")
  c=$(sed -n 's/.* \([0-9.]*\) ms\/commit.*/\1/p' "$out" | head -1)
  w=$(sed -n 's/^BENCH_SUMMARY .* writer_us_per_paid=\([0-9.]*\).*/\1/p' "$out")
  paid[$which]+="$p "
  replay[$which]+="$r "
  commit[$which]+="$c "
  writer[$which]+="$w "
  printf '%-4s %-6s %10s %12s %10s %10s\n' "$n" "$which" "$p" "$r" "$c" "$w"
done

median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else printf "%.3f\n", (v[NR/2]+v[NR/2+1])/2}'; }
echo
printf '%-34s %10s %12s %10s %10s\n' "median of $RUNS runs" paid/proxy replay/static ms/commit writer-us
for which in A B; do
  bin=$A_BIN
  [[ $which == B ]] && bin=$B_BIN
  printf '%-34s %10s %12s %10s %10s\n' "$which $(basename "$bin")" \
    "$(median <<<"${paid[$which]:-}")" "$(median <<<"${replay[$which]:-}")" "$(median <<<"${commit[$which]:-}")" \
    "$(median <<<"${writer[$which]:-}")"
done
pa=$(median <<<"${paid[A]:-}"); pb=$(median <<<"${paid[B]:-}")
ra=$(median <<<"${replay[A]:-}"); rb=$(median <<<"${replay[B]:-}")
awk -v pa="$pa" -v pb="$pb" -v ra="$ra" -v rb="$rb" 'BEGIN {
  if (pa > 0 && ra > 0) printf "B/A: paid %.2f, replay %.2f\n", pb / pa, rb / ra }'
exit "$failed"
