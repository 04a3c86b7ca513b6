#!/usr/bin/env bash
# Builds payment_header_fuzzer with clang + libFuzzer + ASan/UBSan in build-fuzz/ (standalone, apart
# from build/), seeds a corpus from tests/x402/fixtures (header values and the JSON inside them) and
# runs it for SECONDS (default 60). Crash inputs land in build-fuzz/artifacts/.
#   fuzz/run.sh [SECONDS]
# env: AGENTPAY_FUZZ_BUILD (build dir), FUZZ_ARGS (extra libFuzzer flags, e.g. -jobs=2)
set -euo pipefail
seconds=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${AGENTPAY_FUZZ_BUILD:-$root/build-fuzz}

CC=clang CXX=clang++ cmake -S "$root/fuzz" -B "$build" -G Ninja >/dev/null
# The build dir ignores itself, so the repository's .gitignore needs no entry.
echo '*' >"$build/.gitignore"
ninja -C "$build" payment_header_fuzzer

corpus=$build/corpus/payment_header
mkdir -p "$corpus" "$build/artifacts"
python3 - "$root/tests/x402/fixtures" "$corpus" <<'PY'
import base64, hashlib, json, pathlib, sys
fixtures, corpus = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def seed(data: bytes) -> None:
    (corpus / ("seed-" + hashlib.sha1(data).hexdigest())).write_bytes(data)
for path in sorted(fixtures.glob("*.json")):
    fixture = json.loads(path.read_text())
    for key in ("value", "challenge"):
        value = fixture.get(key)
        if isinstance(value, str):
            seed(value.encode())                      # the header as sent
            seed(base64.b64decode(value))             # the JSON inside it
        elif isinstance(value, dict):
            seed(json.dumps(value).encode())
PY

exec "$build/payment_header_fuzzer" "$corpus" -max_total_time="$seconds" \
  -dict="$root/fuzz/payment_header.dict" -artifact_prefix="$build/artifacts/" \
  -print_final_stats=1 ${FUZZ_ARGS:-}
