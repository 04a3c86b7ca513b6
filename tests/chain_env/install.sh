#!/usr/bin/env bash
# Installs the pinned node packages of tests/chain_env (Anvil, solc-js, viem, official x402
# clients and server) with `npm ci`. Idempotent and fast: skips when node_modules was installed
# from this exact package-lock.json and the Anvil binary is there.
#   bash tests/chain_env/install.sh [--force]
# Needs node >= 20 and npm; reaches only the npm registry. Never use --omit=optional: the Anvil
# binary comes in the optional dependency @foundry-rs/anvil-linux-amd64.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

stamp=node_modules/.agentpay-lock.sha256
anvil=node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil
want=$(sha256sum package-lock.json | cut -d' ' -f1)

if [[ "${1:-}" != "--force" && -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$anvil" ]]; then
  echo "chain_env: node_modules up to date"
  exit 0
fi

command -v node >/dev/null || { echo "chain_env: node is not installed" >&2; exit 1; }
command -v npm >/dev/null || { echo "chain_env: npm is not installed" >&2; exit 1; }

echo "chain_env: npm ci ..."
# Retry once: a registry hiccup should not fail a bootstrap.
for attempt in 1 2; do
  if npm ci --no-audit --no-fund --prefer-offline --loglevel=error; then
    break
  fi
  [[ $attempt == 2 ]] && { echo "chain_env: npm ci failed" >&2; exit 1; }
  echo "chain_env: npm ci failed, retrying" >&2
  sleep 3
done

[[ -x "$anvil" ]] || { echo "chain_env: $anvil missing after npm ci" >&2; exit 1; }
"$anvil" --version | head -1
echo "$want" > "$stamp"
echo "chain_env: installed"
