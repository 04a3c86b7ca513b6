#!/usr/bin/env bash
# `npm ci` of one test directory's pinned packages, once per package-lock.json: skips when
# node_modules was installed from this exact lock and the binary the directory is for is there;
# retries once (a registry hiccup should not fail a bootstrap); prints that binary's version.
# Shared by tests/chain_env/install.sh and tests/mcp_conformance/install.sh.
#   bash tests/npm_ci_once.sh DIR NAME BINARY [--force]    (BINARY relative to DIR)
set -euo pipefail
dir=$1 name=$2 binary=$3
cd "$dir"
stamp=node_modules/.agentpay-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)

if [[ "${4:-}" != "--force" && -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$binary" ]]; then
  echo "$name: node_modules up to date"
  exit 0
fi

command -v node >/dev/null || { echo "$name: node is not installed" >&2; exit 1; }
command -v npm >/dev/null || { echo "$name: npm is not installed" >&2; exit 1; }

echo "$name: npm ci ..."
for attempt in 1 2; do
  if npm ci --no-audit --no-fund --prefer-offline --loglevel=error; then
    break
  fi
  [[ $attempt == 2 ]] && { echo "$name: npm ci failed" >&2; exit 1; }
  echo "$name: npm ci failed, retrying" >&2
  sleep 3
done

[[ -x "$binary" ]] || { echo "$name: $binary missing after npm ci" >&2; exit 1; }
"$binary" --version | head -1
echo "$want" > "$stamp"
echo "$name: installed"
