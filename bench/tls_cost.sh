#!/usr/bin/env bash
# The cost of TLS: bench/wallet_vs_nginx.sh over plain HTTP, then over HTTPS everywhere (BENCH_TLS=1),
# in one run, and the ratio of paid requests/s over HTTPS to over HTTP. Each half prints its own
# report (gateway vs nginx in the same transport, handshakes per request for HTTPS) and its money
# checks. Settings: as for wallet_vs_nginx.sh (BENCH_DURATION, BENCH_CONNECTIONS, ...).
# Exit status: that of the first half that failed, else 0.
set -uo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/agentpay-tls-cost.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

status=0
for tls in 0 1; do
  echo "=== BENCH_TLS=$tls"
  BENCH_TLS=$tls bash "$BENCH_DIR/wallet_vs_nginx.sh" | tee "$TMP/tls-$tls.out"
  half=${PIPESTATUS[0]}
  ((status == 0)) && status=$half
  echo
done
field() { grep -m1 '^BENCH_SUMMARY' "$TMP/tls-$1.out" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k { print $2 }'; }
http=$(field 0 paid_rps)
https=$(field 1 paid_rps)
if [[ -n $http && -n $https ]]; then
  echo "paid requests/s: $http over HTTP, $https over HTTPS"
  echo "HTTPS/HTTP (paid) = $(awk -v a="$https" -v b="$http" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')"
  echo "gateway/nginx (paid): $(field 0 paid_ratio) over HTTP, $(field 1 paid_ratio) over HTTPS"
fi
exit "$status"
