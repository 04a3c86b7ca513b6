#!/usr/bin/env bash
# Installs what the tests need, builds, and runs every test suite with ctest (unit, store
# conformance, integration against real gateway and seller processes), then the C++ suites again
# under ASan + UBSan (scripts/test-asan.sh; skipped when ctest arguments select tests, or with
# AGENTPAY_ASAN=0). Both run JOBS tests side by side (ctest -j; AGENTPAY_TEST_JOBS, default 4:
# most tests wait on processes, chains and databases rather than compute, so a 2-core machine runs
# four at once; tests/CMakeLists.txt says which may not share the machine and why).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's wall time goes to stderr at the end, so a slow CI run shows where its time went.
times=()
phase() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  local rc=$?
  times+=("$name $((SECONDS - start)) s")
  return $rc
}
phase bootstrap bash scripts/bootstrap.sh
phase build bash scripts/build.sh
status=0
export AGENTPAY_TEST_JOBS="${AGENTPAY_TEST_JOBS:-4}"
phase tests bash -c 'cd build && exec ctest --output-on-failure --timeout 900 -j "$AGENTPAY_TEST_JOBS" "$@"' \
  ctest "$@" || status=1
if [ $# -eq 0 ] && [ "${AGENTPAY_ASAN:-1}" != 0 ]; then
  phase sanitizers bash scripts/test-asan.sh || status=1
fi
echo "test.sh: $(printf '%s, ' "${times[@]}")total $SECONDS s" >&2
exit $status
