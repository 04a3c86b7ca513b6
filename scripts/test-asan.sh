#!/usr/bin/env bash
# Builds every C++ test suite (target agentpay_cxx_tests) and the agentpay binary with
# AddressSanitizer + UndefinedBehaviorSanitizer into ./build-asan, then runs the gtest suites
# (ctest -LE script: every test but the Python/node/bash ones) and one integration test against
# the sanitized gateway. A sanitizer report fails the test. Extra arguments go to the first ctest.
# The same build has the simulator's mutants (-DAGENTPAY_SIM_MUTANTS=ON, never in a release): the
# mutant job (tests/sim/test_mutants.py, also `ctest -R sim.mutants` there) shows `agentpay sim
# swarm` catching each flawed approach; it runs beside the gtest suites.
# The gtest suites run AGENTPAY_TEST_JOBS at once (ctest -j, default 4; see scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# -Og with minimal debug info: sanitizer stacks keep their functions and lines, and the build costs
# about half of -O1's (a build type of its own for these flags; -O1 took 27 s where -Og takes 17 s
# and the release build's -O2 -g1 11 s, on cli/serve.cc). GCC 12 warns maybe-uninitialized inside
# libstdc++'s <regex> below -O2 (a false positive); the release build keeps that warning as an
# error for our code.
flags="-Og -g1 -Wno-maybe-uninitialized"
if [ ! -f build-asan/build.ninja ] ||
  ! grep -q '^AGENTPAY_SIM_MUTANTS:BOOL=ON' build-asan/CMakeCache.txt ||
  ! grep -qxF "CMAKE_CXX_FLAGS_SANITIZE:STRING=$flags" build-asan/CMakeCache.txt; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Sanitize \
    -DCMAKE_CXX_FLAGS_SANITIZE="$flags" \
    -DAGENTPAY_SANITIZE=ON -DAGENTPAY_SIM_MUTANTS=ON >/dev/null
  echo '*' >build-asan/.gitignore  # the build dir ignores itself
fi
ninja -C build-asan agentpay_cxx_tests agentpay
# Errors abort with a stack; leaks are reported at exit. UBSan stops at the first report.
asan="abort_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1"
export ASAN_OPTIONS="$asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
cd build-asan
status=0
if [ $# -eq 0 ]; then
  # The mutant job: each flawed approach caught by the swarm (the seeds and invariants printed).
  # Its hunts are CPU-bound processes that share nothing with the suites, so it runs beside them,
  # at the lowest priority: the suites have time and fairness bounds (a budget-file test failed its
  # fairness bound with the hunts at nice 5), the hunts only their deadline of 30 minutes.
  rm -f mutants.log
  nice -n 19 python3 ../tests/sim/test_mutants.py --agentpay "$PWD/agentpay" >mutants.log 2>&1 &
  mutants=$!
fi
ctest --output-on-failure --timeout 900 -j "${AGENTPAY_TEST_JOBS:-4}" -LE script "$@" || status=1
if [ $# -eq 0 ]; then
  # The gateway and seller processes are stopped by signals and their exit status is not
  # checked: their sanitizer reports go to files, and any report fails the run.
  reports=$PWD/sanitizer-reports
  rm -rf "$reports" && mkdir -p "$reports"
  ASAN_OPTIONS="$ASAN_OPTIONS:log_path=$reports/asan" \
    UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=$reports/ubsan" \
    ctest --output-on-failure --timeout 900 -R '^integration\.wallet_gateway$' || status=1
  if ! wait "$mutants"; then
    echo "test-asan: the mutant job failed" >&2
    status=1
  fi
  echo "test-asan: the mutant job (tests/sim/test_mutants.py):"
  cat mutants.log
  if compgen -G "$reports/*" >/dev/null; then
    echo "test-asan: sanitizer reports from the gateway processes:" >&2
    cat "$reports"/* >&2
    status=1
  fi
fi
exit $status
