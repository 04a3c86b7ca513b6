#!/usr/bin/env bash
# Installs what the tests need, builds, and runs every test suite with ctest: the suites that run
# processes (integration against real gateway and seller processes, Anvil, PostgreSQL, nginx,
# Chromium, the docs; ctest label `script`) on the release build, then the C++ suites (unit, store
# conformance, simulator) under ASan + UBSan (scripts/test-asan.sh), where each C++ test runs once:
# the release build compiles only what the script suites run. With ctest arguments (a selection:
# `scripts/test.sh -R wallet`), or with AGENTPAY_ASAN=0, the release build has every target and
# ctest runs the selection (or everything) there, without the sanitizers. Tests run JOBS side by
# side (ctest -j; AGENTPAY_TEST_JOBS, default 4: most tests wait on processes, chains and databases
# rather than compute, so a 2-core machine runs four at once; tests/CMakeLists.txt says which may
# not share the machine and why).
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
sanitizers=0
if [ $# -eq 0 ] && [ "${AGENTPAY_ASAN:-1}" != 0 ]; then sanitizers=1; fi
phase bootstrap bash scripts/bootstrap.sh
if [ $sanitizers = 1 ]; then
  # What the script suites run (tests/CMakeLists.txt: agentpay_script_tests), and the benchmarks so
  # that they keep compiling; the C++ suites are built and run by the sanitizer phase.
  phase build bash scripts/build.sh agentpay_script_tests sim_bench verify_bench client_pay_bench
  set -- -L script
else
  phase build bash scripts/build.sh
fi
status=0
export AGENTPAY_TEST_JOBS="${AGENTPAY_TEST_JOBS:-4}"
phase tests bash -c 'cd build && exec ctest --output-on-failure --timeout 900 -j "$AGENTPAY_TEST_JOBS" "$@"' \
  ctest "$@" || status=1
if [ $sanitizers = 1 ]; then
  phase sanitizers bash scripts/test-asan.sh || status=1
fi
echo "test.sh: $(printf '%s, ' "${times[@]}")total $SECONDS s" >&2
exit $status
