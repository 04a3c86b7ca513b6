#!/usr/bin/env bash
# Paid wallet requests per second through the AgentPay gateway, as a ratio against nginx proxy_pass
# to the same demo seller, measured with the same wrk settings in the same run; the same for replays
# of completed Idempotency-Keys. See bench/README.md.
#
# Usage: bench/wallet_vs_nginx.sh
#   BENCH_DURATION=10s      wrk -d for every scenario
#   BENCH_CONNECTIONS=32    wrk -c for every scenario
#   BENCH_THREADS=1         wrk -t for every scenario
#   BENCH_REPLAY_KEYS=100   completed keys the replay scenario cycles through
#   BENCH_FLOOR=0.30        minimum paid/nginx ratio
#   BENCH_TLS=1             everything over HTTPS: wrk to the gateway and to nginx, both calling the
#                           seller through an HTTPS upstream (nginx terminating TLS in front of it);
#                           certificates from a throwaway CA (tests/tls/make-test-ca.sh)
#   AGENTPAY_BIN=build/agentpay, NGINX_BIN=/usr/sbin/nginx, WRK_BIN=/usr/bin/wrk
#   BENCH_TMPDIR=$TMPDIR    where the temp dir (SQLite database included) is created
#   BENCH_KEEP_TMP=1        keep the temp dir (logs, database) for inspection
#   BENCH_VERBOSE=1         also print wrk's own output
# Exit status: 0 pass; 1 paid ratio below the floor, a money check failed, or a scenario had errors
# (non-2xx, socket errors, wrong replay flag); 2 the benchmark could not be set up.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
AGENTPAY_BIN=${AGENTPAY_BIN:-$ROOT/build/agentpay}
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
WRK_BIN=${WRK_BIN:-/usr/bin/wrk}
DURATION=${BENCH_DURATION:-10s}
CONNECTIONS=${BENCH_CONNECTIONS:-32}
THREADS=${BENCH_THREADS:-1}
REPLAY_KEYS=${BENCH_REPLAY_KEYS:-100}
FLOOR=${BENCH_FLOOR:-0.30}
TLS=${BENCH_TLS:-0}
PRICE=1
REQ_PATH=/bench
REQ_BODY='{"query":"bench"}'
LUA=$BENCH_DIR/wrk/bench.lua

die() { echo "wallet_vs_nginx: $*" >&2; exit 2; }
log() { echo "# $*" >&2; }

for tool in "$AGENTPAY_BIN" "$NGINX_BIN" "$WRK_BIN"; do
  [[ -x $tool ]] || die "$tool not found or not executable (build: ninja -C $ROOT/build agentpay)"
done
for tool in curl python3 awk openssl; do
  command -v "$tool" >/dev/null || die "$tool is required"
done
[[ $CONNECTIONS =~ ^[0-9]+$ && $CONNECTIONS -ge 1 ]] || die "BENCH_CONNECTIONS must be a positive integer"
[[ $THREADS =~ ^[0-9]+$ && $THREADS -ge 1 && $THREADS -le $CONNECTIONS ]] ||
  die "BENCH_THREADS must be between 1 and BENCH_CONNECTIONS"
[[ $REPLAY_KEYS =~ ^[0-9]+$ && $REPLAY_KEYS -ge 1 ]] || die "BENCH_REPLAY_KEYS must be a positive integer"

TMP=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/agentpay-bench.XXXXXX")
PIDS=()
cleanup() {
  local status=$?
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [[ ${BENCH_KEEP_TMP:-0} == 1 || -e $TMP/.keep ]]; then
    log "kept $TMP"
  else
    rm -rf "$TMP"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- helpers -------------------------------------------------------------------------------------

# wait_listening LOG PID NAME: waits for "listening on http://HOST:PORT" in LOG, prints PORT.
wait_listening() {
  local logfile=$1 pid=$2 name=$3 line
  for _ in $(seq 200); do
    line=$(grep -m1 -o 'listening on https\{0,1\}://[0-9.]*:[0-9]*' "$logfile" 2>/dev/null || true)
    if [[ -n $line ]]; then echo "${line##*:}"; return 0; fi
    kill -0 "$pid" 2>/dev/null || { cat "$logfile" >&2; die "$name exited before listening"; }
    sleep 0.05
  done
  cat "$logfile" >&2
  die "$name did not print 'listening on' within 10 s"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# json_field FIELD < JSON
json_field() {
  python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

# get_field URL FIELD [CURL ARGS...]: GETs URL and prints FIELD of its JSON body; on any failure
# says what failed (status, body, which processes are still alive) and stops.
get_field() {
  local url=$1 field=$2 body code
  shift 2
  body=$(curl -s -m 10 "${CURL_TLS[@]}" -w '\n%{http_code}' "$@" "$url") || true
  code=${body##*$'\n'}
  body=${body%$'\n'*}
  if [[ $code == 2* ]] && json_field "$field" <<<"$body" 2>/dev/null; then return 0; fi
  echo "wallet_vs_nginx: GET $url answered '${code:-nothing}': ${body:0:300}" >&2
  check_alive
  die "GET $url failed"
}

# check_alive: stops with the log tail of any started process that has exited.
check_alive() {
  local name pid dead=0 status
  for name in seller nginx gateway; do
    case $name in
      seller) pid=${SELLER_PID:-} ;; nginx) pid=${NGINX_PID:-} ;; gateway) pid=${GATEWAY_PID:-} ;;
    esac
    [[ -z $pid ]] && continue
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null && status=0 || status=$?
      ((status == 127)) && status='unknown (not our child in this subshell)'
      echo "wallet_vs_nginx: the $name (pid $pid) exited, status $status; its log ends with:" >&2
      case $name in
        seller) tail -n 20 "$TMP/seller.log" >&2 ;; nginx) tail -n 20 "$TMP/nginx/error.log" >&2 ;;
        gateway) tail -n 20 "$TMP/gateway.log" >&2 ;;
      esac
      dead=1
    fi
  done
  if ((dead)); then
    touch "$TMP/.keep"
    die "a process under test died (temp dir kept: $TMP)"
  fi
}

# metric NAME_WITH_LABELS < metrics text (0 when absent)
metric() {
  awk -v n="$1" '$1 == n { v = $2 } END { print (v == "" ? 0 : v) }'
}

cpu_ticks() {  # user+system clock ticks of a process and all its threads
  local pid total=0 t
  for pid in "$@"; do
    t=$(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)
    total=$((total + t))
  done
  echo "$total"
}
CLK_TCK=$(getconf CLK_TCK)

ctx_switches() {  # voluntary + involuntary context switches of every live thread of the processes
  local pid total=0 t
  for pid in "$@"; do
    t=$(cat /proc/"$pid"/task/*/status 2>/dev/null |
      awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ { n += $2 } END { print n + 0 }')
    total=$((total + t))
  done
  echo "$total"
}

thread_ticks() {  # "name ticks" of each thread of a process, summed by thread name
  local pid=$1 task
  for task in /proc/"$pid"/task/*; do
    printf '%s %s\n' "$(cat "$task/comm" 2>/dev/null)" "$(awk '{ print $14 + $15 }' "$task/stat" 2>/dev/null)"
  done | awk 'NF == 2 { t[$1] += $2 } END { for (n in t) print n, t[n] }' | sort
}

# result_field NAME FILE: a k=v field of the BENCH_RESULT line
result_field() {
  grep -m1 '^BENCH_RESULT ' "$2" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2 }'
}

# run_wrk NAME URL MODE KEY_PREFIX [PID...]: runs wrk, stores results in $TMP/wrk-NAME.out and
# prints nothing; PIDs are the server-side processes whose CPU time is reported. WRK_PATH (default
# $REQ_PATH) is the path requested.
run_wrk() {
  local name=$1 url=$2 mode=$3 prefix=$4
  shift 4
  local out=$TMP/wrk-$name.out before_srv before_seller before_ctx path=${WRK_PATH:-$REQ_PATH}
  before_srv=$(cpu_ticks "$@")
  before_seller=$(cpu_ticks "$SELLER_PID")
  before_ctx=$(ctx_switches "$@")
  [[ $1 == "${GATEWAY_PID:-}" ]] && thread_ticks "$1" >"$TMP/threads-before-$name"
  log "wrk $name: -t$THREADS -c$CONNECTIONS -d$DURATION POST $url$path ($mode keys)"
  local TIMEFORMAT='%U %S'
  {
    time BENCH_MODE=$mode BENCH_API_KEY=$API_KEY BENCH_KEY_PREFIX=$prefix \
      BENCH_REPLAY_KEYS=$REPLAY_KEYS BENCH_PATH=$path BENCH_BODY=$REQ_BODY \
      "$WRK_BIN" -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --timeout 10s -s "$LUA" "$url" \
      >"$out" 2>&1
  } 2>"$TMP/wrk-$name.time" || { cat "$out" >&2; die "wrk failed for $name"; }
  check_alive
  grep -q '^BENCH_RESULT ' "$out" || { cat "$out" >&2; die "wrk printed no BENCH_RESULT for $name"; }
  [[ ${BENCH_VERBOSE:-0} == 1 ]] && sed 's/^/#   /' "$out" >&2
  local wrk_cpu srv_cpu seller_cpu
  wrk_cpu=$(awk '{ printf "%.1f", $1 + $2 }' "$TMP/wrk-$name.time")
  srv_cpu=$(awk -v a="$before_srv" -v b="$(cpu_ticks "$@")" -v hz="$CLK_TCK" 'BEGIN { printf "%.1f", (b - a) / hz }')
  seller_cpu=$(awk -v a="$before_seller" -v b="$(cpu_ticks "$SELLER_PID")" -v hz="$CLK_TCK" 'BEGIN { printf "%.1f", (b - a) / hz }')
  echo "$wrk_cpu $srv_cpu $seller_cpu" >"$TMP/cpu-$name"
  # Per answer: CPU microseconds of wrk, the front and the seller, and the front's context switches.
  local n ticks_srv ticks_seller
  n=$(result_field requests "$out")
  ticks_srv=$(( $(cpu_ticks "$@") - before_srv ))
  ticks_seller=$(( $(cpu_ticks "$SELLER_PID") - before_seller ))
  awk -v n="$n" -v w="$wrk_cpu" -v s="$ticks_srv" -v l="$ticks_seller" -v hz="$CLK_TCK" \
    -v c="$(( $(ctx_switches "$@") - before_ctx ))" 'BEGIN { if (n < 1) n = 1;
      printf "%.0f/%.0f/%.0f %.2f", w * 1e6 / n, s * 1e6 / hz / n, l * 1e6 / hz / n, c / n }' \
    >"$TMP/per-request-$name"
  # The gateway's threads apart: the store's writer runs every decision one after another, so its
  # CPU per request bounds what one gateway can serve.
  if [[ -e $TMP/threads-before-$name ]]; then
    thread_ticks "$1" | awk -v n="$n" -v hz="$CLK_TCK" 'NR == FNR { b[$1] = $2; next }
      { us = ($2 - b[$1]) * 1e6 / hz / (n < 1 ? 1 : n); if (us >= 0.5) printf "%s%s %.0f", (k++ ? ", " : ""), $1, us }
      END { print "" }' "$TMP/threads-before-$name" - >"$TMP/threads-$name"
  fi
}

# With BENCH_TLS=1: a throwaway CA and a certificate for localhost and 127.0.0.1; curl trusts it.
CURL_TLS=()
SCHEME=http
if [[ $TLS == 1 ]]; then
  bash "$ROOT/tests/tls/make-test-ca.sh" "$TMP/ca" || die "cannot make the test CA"
  CURL_TLS=(--cacert "$TMP/ca/ca.pem")
  SCHEME=https
fi

# Run a private copy: a rebuild of build/agentpay during the run must not change what is measured.
cp "$AGENTPAY_BIN" "$TMP/agentpay"
BIN_INFO="$AGENTPAY_BIN, built $(date -r "$AGENTPAY_BIN" '+%F %T')"
AGENTPAY_BIN=$TMP/agentpay
"$AGENTPAY_BIN" --help >/dev/null 2>&1 || die "$AGENTPAY_BIN does not run (copied mid-build?)"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

# --- 1. the demo seller --------------------------------------------------------------------------
"$AGENTPAY_BIN" seller --listen 127.0.0.1:0 >"$TMP/seller.log" 2>&1 &
SELLER_PID=$!
PIDS+=("$SELLER_PID")
SELLER_PORT=$(wait_listening "$TMP/seller.log" "$SELLER_PID" seller)
SELLER=http://127.0.0.1:$SELLER_PORT
log "seller   $SELLER (pid $SELLER_PID)"
seller_executed() { get_field "$SELLER/_seller/stats" executed; }

# --- 2. nginx proxy_pass to the seller -----------------------------------------------------------
NGINX_DIR=$TMP/nginx
mkdir -p "$NGINX_DIR/static"
chmod 711 "$TMP"
chmod 755 "$NGINX_DIR" "$NGINX_DIR/static"
# The static baseline's file: the seller's answer to the benchmark's request, as a replay returns it.
curl -sf -X POST -H 'Content-Type: application/json' --data-binary "$REQ_BODY" "$SELLER$REQ_PATH" \
  >"$NGINX_DIR/static/static.json" || die "the seller did not answer $REQ_PATH"
chmod 644 "$NGINX_DIR/static/static.json"
STATIC_PATH=/static.json
NGINX_PID=
TEMPLATE=$BENCH_DIR/nginx.conf.template
[[ $TLS == 1 ]] && TEMPLATE=$BENCH_DIR/nginx-tls.conf.template
for attempt in 1 2 3; do
  NGINX_PORT=$(free_port)
  UPSTREAM_PORT=$(free_port)
  sed -e "s|@TMP@|$NGINX_DIR|g" -e "s|@LISTEN_PORT@|$NGINX_PORT|g" -e "s|@SELLER_PORT@|$SELLER_PORT|g" \
    -e "s|@UPSTREAM_PORT@|$UPSTREAM_PORT|g" -e "s|@CA@|$TMP/ca|g" "$TEMPLATE" >"$NGINX_DIR/nginx.conf"
  "$NGINX_BIN" -p "$NGINX_DIR" -c "$NGINX_DIR/nginx.conf" -e "$NGINX_DIR/error.log" -g 'daemon off;' \
    >"$NGINX_DIR/stdout.log" 2>&1 &
  NGINX_PID=$!
  up=0
  for _ in $(seq 100); do
    kill -0 "$NGINX_PID" 2>/dev/null || break
    if curl -sf "${CURL_TLS[@]}" -o /dev/null -X POST -d "$REQ_BODY" "$SCHEME://127.0.0.1:$NGINX_PORT$REQ_PATH"; then
      up=1
      break
    fi
    sleep 0.05
  done
  if ((up)); then PIDS+=("$NGINX_PID"); break; fi
  kill -TERM "$NGINX_PID" 2>/dev/null || true
  wait "$NGINX_PID" 2>/dev/null || true
  NGINX_PID=
  log "nginx attempt $attempt failed: $(tail -n 3 "$NGINX_DIR/error.log" "$NGINX_DIR/stdout.log" 2>/dev/null | tr '\n' ' ')"
done
[[ -n $NGINX_PID ]] || die "nginx did not start"
NGINX=$SCHEME://127.0.0.1:$NGINX_PORT
# The seller as the gateway calls it: directly, or through nginx's HTTPS upstream server.
UPSTREAM=$SELLER
[[ $TLS == 1 ]] && UPSTREAM=https://localhost:$UPSTREAM_PORT
# The master and its worker(s), one pid a line, for the CPU column.
nginx_pids() { echo "$NGINX_PID"; ps -o pid= --ppid "$NGINX_PID" 2>/dev/null | tr -d " "; }
log "nginx    $NGINX (master pid $NGINX_PID, $("$NGINX_BIN" -v 2>&1 | sed 's/.*version: //'))"

# --- 3. the gateway ------------------------------------------------------------------------------
ADMIN_TOKEN=adm_$(python3 -c 'import secrets; print(secrets.token_hex(24))')
(umask 077 && echo "$ADMIN_TOKEN" >"$TMP/token")
TLS_ARGS=()
[[ $TLS == 1 ]] && TLS_ARGS=(--tls-cert "$TMP/ca/localhost.pem" --tls-key "$TMP/ca/localhost.key"
  --ca-file "$TMP/ca/ca.pem")
"$AGENTPAY_BIN" serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --db "sqlite:$TMP/agentpay.db" \
  --upstream "$UPSTREAM" --price "$PRICE" --admin-token-file "$TMP/token" "${TLS_ARGS[@]}" \
  >"$TMP/gateway.log" 2>&1 &
GATEWAY_PID=$!
PIDS+=("$GATEWAY_PID")
GATEWAY_PORT=$(wait_listening "$TMP/gateway.log" "$GATEWAY_PID" gateway)
GATEWAY=$SCHEME://127.0.0.1:$GATEWAY_PORT
# The admin API and /metrics are on the admin listener only (--admin-listen); serve prints its URL.
ADMIN_URL=$(grep -m1 -o '(admin listener): https\{0,1\}://[0-9.]*:[0-9]*' "$TMP/gateway.log" | grep -o 'http.*') \
  || die "the gateway did not print its admin listener"
FS_TYPE=$(stat -f -c %T "$TMP")
log "gateway  $GATEWAY (pid $GATEWAY_PID, database $TMP/agentpay.db on $FS_TYPE)"
if [[ $FS_TYPE == tmpfs || $FS_TYPE == ramfs ]]; then
  log "WARNING: the database is on $FS_TYPE, where fsync is free: synchronous=FULL costs nothing here"
fi

admin() {  # admin METHOD PATH BODY
  curl -sf "${CURL_TLS[@]}" -X "$1" -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
    -d "$3" "$ADMIN_URL$2"
}
ACCOUNT_JSON=$(admin POST /admin/v1/accounts '{"name":"bench"}') || die "cannot create the account"
ACCOUNT_ID=$(json_field account_id <<<"$ACCOUNT_JSON")
API_KEY=$(json_field api_key <<<"$ACCOUNT_JSON")
admin POST "/admin/v1/accounts/$ACCOUNT_ID/deposits" '{"amount":"1000000000000","reference":"bench"}' \
  >/dev/null || die "cannot fund the account"
log "account  $ACCOUNT_ID funded with 1000000000000 atomic units, price $PRICE"

account_field() { get_field "$GATEWAY/v1/account" "$1" -H "Authorization: Bearer $API_KEY"; }
gateway_metrics() { curl -sf -m 10 "${CURL_TLS[@]}" "$ADMIN_URL/metrics" || { check_alive; die "GET $ADMIN_URL/metrics failed"; }; }

# Waits until no hold is open and `captured` has stopped moving: requests wrk sent just before it
# stopped are finished by the gateway after wrk has gone.
quiesce() {
  local last=-1 now held
  for _ in $(seq 150); do
    held=$(account_field held)
    now=$(account_field captured)
    if [[ $held == 0 && $now == "$last" ]]; then return 0; fi
    last=$now
    sleep 0.2
  done
  die "the gateway did not settle within 30 s (held $held)"
}

# BENCH_TLS=1: nginx logs every request on the HTTPS upstream with its connection's request count
# and whether its TLS session was resumed; lines A+1..B are one phase's.
UPSTREAM_LOG=$NGINX_DIR/upstream-connections.log
log_lines() { if [[ -f $UPSTREAM_LOG ]]; then wc -l <"$UPSTREAM_LOG"; else echo 0; fi; }
# upstream_tls A B: "requests new-connections resumed-sessions" of those lines
upstream_tls() {
  awk -v a="$1" -v b="$2" 'NR > a && NR <= b { n++; if ($2 == 1) { c++; if ($3 == "r") r++ } }
    END { printf "%d %d %d", n, c, r }' "$UPSTREAM_LOG" 2>/dev/null || echo "0 0 0"
}

RUN_ID=$(python3 -c 'import secrets; print(secrets.token_hex(6))')
FAILURES=()

# --- 4a. nginx baseline (before) -----------------------------------------------------------------
mapfile -t NGINX_PIDS < <(nginx_pids)
L0=$(log_lines)
run_wrk nginx1 "$NGINX" unique "nginx-$RUN_ID" "${NGINX_PIDS[@]}"
L1=$(log_lines)
WRK_PATH=$STATIC_PATH run_wrk static1 "$NGINX" unique "static-$RUN_ID" "${NGINX_PIDS[@]}"

# --- 4b. paid requests, unique keys --------------------------------------------------------------
quiesce
M0=$(gateway_metrics)
CAPTURED0=$(account_field captured)
EXECUTED0=$(seller_executed)
# One metrics sample in the middle of the run, for the write queue depth under load.
(sleep "$(awk -v d="$DURATION" 'BEGIN { s = d + 0; if (d ~ /m$/) s *= 60; print s / 2 }')" &&
  gateway_metrics >"$TMP/metrics-mid-paid" 2>/dev/null) &
MID_PID=$!
L2=$(log_lines)
run_wrk paid "$GATEWAY" unique "paid-$RUN_ID" "$GATEWAY_PID"
wait "$MID_PID" 2>/dev/null || true
quiesce
L3=$(log_lines)
M1=$(gateway_metrics)
CAPTURED1=$(account_field captured)
EXECUTED1=$(seller_executed)
HELD1=$(account_field held)

OUT=$TMP/wrk-paid.out
P_2XX=$(result_field ok2xx "$OUT")
P_FRESH=$(result_field fresh "$OUT")
P_REPLAYED=$(result_field replayed "$OUT")
delta() { echo $(( $(metric "$1" <<<"$M1") - $(metric "$1" <<<"$M0") )); }
GW_2XX=$(delta 'agentpay_paid_responses_total{class="2xx"}')
GW_CAPTURES=$(delta 'agentpay_wallet_verdicts_total{verdict="capture"}')
COMMITS=$(delta agentpay_store_commits_total)
DECISIONS=$(delta agentpay_store_decisions_total)
ROLLBACKS=$(delta agentpay_store_rollbacks_total)
CAPTURED_DELTA=$((CAPTURED1 - CAPTURED0))
EXECUTED_DELTA=$((EXECUTED1 - EXECUTED0))
IN_FLIGHT=$((GW_2XX - P_2XX))

PAID_MONEY=ok
money_fail() { PAID_MONEY=FAIL; FAILURES+=("money check (paid): $*"); }
((CAPTURED_DELTA == GW_2XX * PRICE)) ||
  money_fail "captured +$CAPTURED_DELTA but the gateway sent $GW_2XX 2xx paid responses x price $PRICE"
((IN_FLIGHT >= 0 && IN_FLIGHT <= CONNECTIONS)) ||
  money_fail "wrk received $P_2XX 2xx but the gateway sent $GW_2XX (difference must be 0..$CONNECTIONS, the requests in flight when wrk stopped)"
((GW_CAPTURES == GW_2XX)) || money_fail "$GW_CAPTURES captures for $GW_2XX 2xx paid responses"
((EXECUTED_DELTA == GW_CAPTURES)) ||
  money_fail "the seller executed $EXECUTED_DELTA requests for $GW_CAPTURES captures"
[[ $HELD1 == 0 ]] || money_fail "$HELD1 still held after the run"
((P_REPLAYED == 0 && P_FRESH == P_2XX)) ||
  FAILURES+=("paid: $P_REPLAYED responses to unique keys said Idempotent-Replayed: true, $P_FRESH said false (of $P_2XX 2xx)")

# --- 4c. replays of completed keys ---------------------------------------------------------------
log "paying for $REPLAY_KEYS keys with curl, one at a time"
REPLAY_PREFIX=replay-$RUN_ID
for ((i = 0; i < REPLAY_KEYS; i++)); do
  code=$(curl -s "${CURL_TLS[@]}" -o /dev/null -D "$TMP/replay-setup.headers" -w '%{http_code}' -X POST \
    -H 'Content-Type: application/json' -H "Authorization: Bearer $API_KEY" \
    -H "Idempotency-Key: $REPLAY_PREFIX-r-$i" --data-binary "$REQ_BODY" "$GATEWAY$REQ_PATH")
  [[ $code == 2* ]] || die "paying for replay key $i answered $code"
  grep -qi '^Idempotent-Replayed: false' "$TMP/replay-setup.headers" ||
    die "paying for replay key $i was not a fresh payment"
done
quiesce
CAPTURED2=$(account_field captured)
((CAPTURED2 - CAPTURED1 == REPLAY_KEYS * PRICE)) ||
  FAILURES+=("money check (replay setup): captured +$((CAPTURED2 - CAPTURED1)) for $REPLAY_KEYS keys x price $PRICE")
EXECUTED2=$(seller_executed)
M2=$(gateway_metrics)
run_wrk replay "$GATEWAY" replay "$REPLAY_PREFIX" "$GATEWAY_PID"
quiesce
M3=$(gateway_metrics)
CAPTURED3=$(account_field captured)
EXECUTED3=$(seller_executed)
OUT=$TMP/wrk-replay.out
R_TOTAL=$(result_field requests "$OUT")
R_REPLAYED=$(result_field replayed "$OUT")
REPLAY_MONEY=ok
((CAPTURED3 == CAPTURED2)) || { REPLAY_MONEY=FAIL; FAILURES+=("money check (replay): captured moved by $((CAPTURED3 - CAPTURED2)) during replays"); }
((EXECUTED3 == EXECUTED2)) || { REPLAY_MONEY=FAIL; FAILURES+=("money check (replay): the seller executed $((EXECUTED3 - EXECUTED2)) requests during replays"); }
((R_REPLAYED == R_TOTAL)) || FAILURES+=("replay: only $R_REPLAYED of $R_TOTAL responses said Idempotent-Replayed: true")
R_COMMITS=$(( $(metric agentpay_store_commits_total <<<"$M3") - $(metric agentpay_store_commits_total <<<"$M2") ))

# --- 4d. unpaid requests: the 402 challenge ------------------------------------------------------
M4=$(gateway_metrics)
EXECUTED4=$(seller_executed)
run_wrk unpaid "$GATEWAY" unpaid "unpaid-$RUN_ID" "$GATEWAY_PID"
M5=$(gateway_metrics)
EXECUTED5=$(seller_executed)
U_COMMITS=$(( $(metric agentpay_store_commits_total <<<"$M5") - $(metric agentpay_store_commits_total <<<"$M4") ))
((EXECUTED5 == EXECUTED4)) || FAILURES+=("unpaid: the seller executed $((EXECUTED5 - EXECUTED4)) requests")

# --- 4e. nginx baselines (after) -----------------------------------------------------------------
run_wrk nginx2 "$NGINX" unique "nginx2-$RUN_ID" "${NGINX_PIDS[@]}"
WRK_PATH=$STATIC_PATH run_wrk static2 "$NGINX" unique "static2-$RUN_ID" "${NGINX_PIDS[@]}"

# --- 5. report -----------------------------------------------------------------------------------
rate() {  # 2xx responses per second of a scenario
  awk -v n="$(result_field ok2xx "$TMP/wrk-$1.out")" -v us="$(result_field duration_us "$TMP/wrk-$1.out")" \
    'BEGIN { printf "%.1f", n * 1e6 / us }'
}
NGINX_RATE=$(awk -v a="$(rate nginx1)" -v b="$(rate nginx2)" 'BEGIN { printf "%.1f", (a + b) / 2 }')
STATIC_RATE=$(awk -v a="$(rate static1)" -v b="$(rate static2)" 'BEGIN { printf "%.1f", (a + b) / 2 }')
ratio() { awk -v a="$1" -v b="${2:-$NGINX_RATE}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

echo
TRANSPORT="plain HTTP"
[[ $TLS == 1 ]] && TRANSPORT="HTTPS everywhere: wrk -> TLS front, front -> HTTPS upstream (nginx TLS -> seller), certificates verified"
echo "AgentPay wallet vs nginx proxy_pass over $TRANSPORT"
echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION, POST $REQ_PATH ${#REQ_BODY}-byte JSON, price $PRICE, $(nproc) CPUs shared by wrk, server and seller"
echo "gateway $BIN_INFO (tree at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD -- src 2>/dev/null || echo ' + uncommitted src changes')), SQLite WAL synchronous=FULL on $FS_TYPE"
echo "load average before/after: $LOAD_BEFORE / $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews every row)"
echo
printf '%-22s %12s %9s %8s %8s %8s %8s  %-24s %s\n' scenario 'requests/s' 'vs base' non-2xx sock-err 'p50 ms' 'p99 ms' 'CPU s: wrk/server/seller' 'per request: CPU us wrk/server/seller, server context switches'
row() {  # row LABEL NAME [BASE_RATE]
  local f=$TMP/wrk-$2.out r errs
  r=$(rate "$2")
  errs=$(( $(result_field sock_connect "$f") + $(result_field sock_read "$f") + $(result_field sock_write "$f") + $(result_field sock_timeout "$f") ))
  printf '%-22s %12s %9s %8s %8s %8s %8s  %-24s %s\n' "$1" "$r" "$(ratio "$r" "${3:-}")x" "$(result_field non2xx "$f")" "$errs" \
    "$(awk -v u="$(result_field lat_p50_us "$f")" 'BEGIN { printf "%.2f", u / 1000 }')" \
    "$(awk -v u="$(result_field lat_p99_us "$f")" 'BEGIN { printf "%.2f", u / 1000 }')" \
    "$(tr ' ' '/' <"$TMP/cpu-$2")" "$(cat "$TMP/per-request-$2")"
  if (( $(result_field non2xx "$f") > 0 || errs > 0 )); then
    FAILURES+=("$1: $(result_field non2xx "$f") non-2xx responses (by status: $(result_field statuses "$f")), $errs socket errors")
  fi
}
row 'nginx -> seller (1st)' nginx1
row 'nginx -> seller (2nd)' nginx2
printf '%-22s %12s %9s\n' 'nginx proxy (mean)' "$NGINX_RATE" '1.00x'
row 'nginx static (1st)' static1 "$STATIC_RATE"
row 'nginx static (2nd)' static2 "$STATIC_RATE"
printf '%-22s %12s %9s\n' 'nginx static (mean)' "$STATIC_RATE" '1.00x'
row 'gateway paid' paid
row 'gateway replay' replay "$STATIC_RATE"
row 'gateway unpaid 402' unpaid "$STATIC_RATE"
echo
echo "money check (paid):   $PAID_MONEY: captured +$CAPTURED_DELTA = $GW_2XX 2xx paid responses x price $PRICE; seller executed $EXECUTED_DELTA; held $HELD1 after the run (wrk read $P_2XX of those 2xx; $IN_FLIGHT were in flight when wrk stopped)"
echo "unpaid (402):         ok: seller executed +$((EXECUTED5 - EXECUTED4)) over $(result_field requests "$TMP/wrk-unpaid.out") challenges; $U_COMMITS commits (the rate limits' exchange with other gateways, every --rate-limit-sync-ms)"
echo "money check (replay): $REPLAY_MONEY: captured +$((CAPTURED3 - CAPTURED2)), seller executed +$((EXECUTED3 - EXECUTED2)) over $R_TOTAL replays ($R_REPLAYED marked Idempotent-Replayed: true) of $REPLAY_KEYS keys"
MID_QUEUE='?'
[[ -s $TMP/metrics-mid-paid ]] && MID_QUEUE=$(metric agentpay_store_write_queue <"$TMP/metrics-mid-paid")
P_US=$(result_field duration_us "$TMP/wrk-paid.out")
echo "group commit (paid):  $DECISIONS decisions in $COMMITS commits: $(awk -v d="$DECISIONS" -v c="$COMMITS" -v us="$P_US" \
  'BEGIN { printf "%.1f decisions/commit, %.0f commits/s, %.2f ms/commit", (c > 0 ? d / c : 0), c * 1e6 / us, (c > 0 ? us / c / 1000 : 0) }'); $ROLLBACKS rolled back; write queue mid-run $MID_QUEUE; replay run: $R_COMMITS commits"
W_DECIDE=$(delta 'agentpay_store_writer_microseconds_total{phase="decide"}')
W_COMMIT=$(delta 'agentpay_store_writer_microseconds_total{phase="commit"}')
W_SYNC=$(delta 'agentpay_store_writer_microseconds_total{phase="sync"}')
W_COMPLETE=$(delta 'agentpay_store_writer_microseconds_total{phase="complete"}')
WAL_BYTES=$(delta agentpay_store_wal_bytes_total)
echo "store writer (paid):  per commit $(awk -v c="$COMMITS" -v a="$W_DECIDE" -v b="$W_COMMIT" -v s="$W_SYNC" -v d="$W_COMPLETE" -v us="$P_US" \
  'BEGIN { if (c < 1) c = 1; printf "%.2f ms deciding, %.2f committing, %.2f syncing, %.2f completing; busy %.0f%% of the run", a / c / 1000, b / c / 1000, s / c / 1000, d / c / 1000, (a + b + s + d) * 100 / us }'); WAL written $(awk -v w="$WAL_BYTES" -v c="$COMMITS" -v p="$GW_2XX" \
  'BEGIN { printf "%.0f KiB a commit, %.0f bytes a paid request", (c > 0 ? w / c / 1024 : 0), (p > 0 ? w / p : 0) }')"
echo "gateway threads, CPU us per request: paid: $(cat "$TMP/threads-paid"); replay: $(cat "$TMP/threads-replay"); unpaid 402: $(cat "$TMP/threads-unpaid")"
WRITER_US=$(tr ',' '\n' <"$TMP/threads-paid" | awk '$1 == "store-writer" { print $2 }')
echo
if [[ $TLS == 1 ]]; then
  read -r N_REQ N_NEW N_RES <<<"$(upstream_tls "$L0" "$L1")"
  read -r G_REQ G_NEW G_RES <<<"$(upstream_tls "$L2" "$L3")"
  G_HS=$(delta agentpay_http_tls_handshakes_total)
  per() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }'; }
  echo "TLS handshakes per request (keep-alive): gateway listener $G_HS for $GW_2XX paid requests ($(per "$G_HS" "$GW_2XX")); gateway -> upstream $G_NEW new connections ($G_RES resumed) for $G_REQ requests ($(per "$G_NEW" "$G_REQ")); nginx -> upstream $N_NEW ($N_RES resumed) for $N_REQ ($(per "$N_NEW" "$N_REQ"))"
fi
PAID_RATIO=$(ratio "$(rate paid)")
REPLAY_RATIO=$(ratio "$(rate replay)" "$STATIC_RATE")
UNPAID_RATIO=$(ratio "$(rate unpaid)" "$STATIC_RATE")
echo "BENCH_SUMMARY tls=$TLS paid_rps=$(rate paid) replay_rps=$(rate replay) unpaid_rps=$(rate unpaid) nginx_rps=$NGINX_RATE static_rps=$STATIC_RATE paid_ratio=$PAID_RATIO replay_ratio=$REPLAY_RATIO unpaid_ratio=$UNPAID_RATIO writer_us_per_paid=${WRITER_US:-0} wal_bytes_per_paid=$(awk -v w="$WAL_BYTES" -v p="$GW_2XX" 'BEGIN { printf "%.0f", (p > 0 ? w / p : 0) }')"
echo "paid/nginx proxy_pass = $PAID_RATIO (floor $FLOOR)"
echo "replay/nginx static   = $REPLAY_RATIO"
echo "unpaid 402/nginx static = $UNPAID_RATIO"
awk -v r="$PAID_RATIO" -v f="$FLOOR" 'BEGIN { exit !(r + 0 < f + 0) }' &&
  FAILURES+=("paid/nginx $PAID_RATIO is below the floor $FLOOR")

if ((${#FAILURES[@]})); then
  echo
  for f in "${FAILURES[@]}"; do echo "FAIL: $f"; done
  exit 1
fi
echo "PASS"
