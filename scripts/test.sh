#!/usr/bin/env bash
# Installs what the tests need, builds, and runs every test suite with ctest (unit, store
# conformance, integration against real gateway and seller processes), then the C++ suites again
# under ASan + UBSan (scripts/test-asan.sh; skipped when ctest arguments select tests, or with
# AGENTPAY_ASAN=0).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/build.sh
status=0
(cd build && ctest --output-on-failure --timeout 900 "$@") || status=1
if [ $# -eq 0 ] && [ "${AGENTPAY_ASAN:-1}" != 0 ]; then
  bash scripts/test-asan.sh || status=1
fi
exit $status
