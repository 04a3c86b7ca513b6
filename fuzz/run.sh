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
# JSON corners where a hand-written reader could part from nlohmann: escapes in keys and values,
# surrogate pairs, a BOM, duplicate keys (the last wins), number kinds and overflow, nesting.
for text in (
    rb'{"x402\u0056ersion":2,"a":"\u00e9\ud83d\ude00\n\"\/\u0000","b":[true,false,null]}',
    rb'{"n":[0,-0,1.5e3,-2E-2,0.0e999,18446744073709551615,18446744073709551616,-9223372036854775809]}',
    rb'{"big":1e308,"tiny":1e-400,"over":1e309}',
    b'\xef\xbb\xbf{"x402Version":1,"x402Version":2} ',
    b'{"s":"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80","bad":"\xed\xa0\x80"}',
    b'[' * 64 + b']' * 64,
    b'[' * 65 + b']' * 65,
):
    seed(text)
PY

exec "$build/payment_header_fuzzer" "$corpus" -max_total_time="$seconds" \
  -dict="$root/fuzz/payment_header.dict" -artifact_prefix="$build/artifacts/" \
  -print_final_stats=1 ${FUZZ_ARGS:-}
