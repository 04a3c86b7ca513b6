#!/usr/bin/env bash
# Installs, builds and runs `agentpay serve --demo` (data in ./agentpay-data).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/build.sh agentpay
exec ./build/agentpay serve --demo "$@"
