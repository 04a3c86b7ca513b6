#!/usr/bin/env bash
# Installs the pinned node packages of tests/chain_env (Anvil, solc-js, viem, official x402
# clients and server) with `npm ci`. Idempotent and fast: skips when node_modules was installed
# from this exact package-lock.json and the Anvil binary is there (tests/npm_ci_once.sh).
#   bash tests/chain_env/install.sh [--force]
# Needs node >= 20 and npm; reaches only the npm registry. Never use --omit=optional: the Anvil
# binary comes in the optional dependency @foundry-rs/anvil-linux-amd64.
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
exec bash "$here/../npm_ci_once.sh" "$here" chain_env \
  node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil "$@"
