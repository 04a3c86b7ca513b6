#!/usr/bin/env bash
# Installs everything AgentPay needs to build and test on Debian 12 (run as root).
# Idempotent: re-running only installs what is missing.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

PACKAGES=(
  # build
  build-essential cmake ninja-build ccache pkg-config clang clang-format libclang-rt-14-dev
  # libraries
  libboost-dev nlohmann-json3-dev libcli11-dev libtomlplusplus-dev libsqlite3-dev sqlite3
  libssl-dev libpq-dev libsecp256k1-dev libcrypto++-dev libjemalloc-dev
  # the system's CA store: HTTPS upstreams, sellers and RPC nodes are verified against it
  ca-certificates
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev librapidcheck-dev python3 wrk nginx-light curl procps
  # the differential fuzz target's second HTTP parser (Node's http_parser; fuzz/, its CI replay)
  libhttp-parser-dev
  # PostgreSQL: the server the tests start privately (tests/pg/cluster.sh), Python's client for their checks
  postgresql-15 python3-psycopg2
  # the Python package (python/, docs/python.md): its venv, its optional httpx and requests, pytest
  python3-venv python3-httpx python3-requests python3-pytest
  openssl  # the CLI: docs recompute a task key and make the TLS tests' CA with it
  # fault tests: packet loss on loopback (tests/fault; the kernel has no netem qdisc)
  nftables
  # browser tests of the inspector page (playwright-core drives it)
  chromium
)

missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Node.js runs the chain test tools (Anvil, solc-js, the official x402 clients); machines of this
# kind ship node 20 + npm 11, a bare Debian 12 gets Debian's.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "bootstrap: installing nodejs npm"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
bash "$(dirname "$0")/../tests/chain_env/install.sh"
bash "$(dirname "$0")/../tests/mcp_conformance/install.sh"
# nginx-light's package starts a system nginx on port 80; the benchmark runs its own instance. Only
# an nginx this very run installed is stopped, by the pid its package wrote: an nginx the machine
# already had is the owner's, and is left alone (never a kill by name).
installed_nginx=0
for package in "${missing[@]}"; do [[ $package == nginx-light ]] && installed_nginx=1; done
if ((installed_nginx)); then
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet nginx 2>/dev/null; then
    systemctl disable --now nginx >/dev/null 2>&1 || true
  elif [[ -s /run/nginx.pid ]]; then
    pid=$(cat /run/nginx.pid)
    [[ $pid =~ ^[0-9]+$ ]] && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == nginx ]] && kill "$pid" 2>/dev/null || true
  fi
fi
echo "bootstrap: packages ready"
