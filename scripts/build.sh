#!/usr/bin/env bash
# Configures and builds AgentPay with Ninja and ccache into ./build (-O2 -g1, -Werror), the given
# targets or all. -g1 keeps functions and line tables (stack traces, perf) and builds in two thirds
# of the time of -g; for a debugger's view of local variables configure another directory with -g.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1" >/dev/null
fi
ninja -C build "$@"
