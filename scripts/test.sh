#!/usr/bin/env bash
# Installs what the tests need, builds, and runs every test suite with ctest (unit, store
# conformance, integration against real gateway and seller processes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/build.sh
cd build
ctest --output-on-failure --timeout 900 "$@"
