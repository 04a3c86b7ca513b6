#!/usr/bin/env bash
# Builds a libFuzzer target with clang + libFuzzer + ASan/UBSan in build-fuzz/ (standalone, apart
# from build/) and runs it for SECONDS (default 60) on its corpus plus the committed seeds
# (fuzz/seeds/TARGET; for payment_header also seeds made from tests/x402/fixtures), with its
# dictionary. Crash inputs land in the artifacts directory. See fuzz/README.md for long campaigns.
#   fuzz/run.sh [TARGET] [SECONDS]
# TARGET: payment_header (default), http_request, http_request_diff, http_response, serve_config,
# admin_body, facilitator_body.
# env: AGENTPAY_FUZZ_BUILD (build dir), FUZZ_CORPUS (the corpus the run adds to; default
# BUILD/corpus/TARGET), FUZZ_ARTIFACTS (default BUILD/artifacts/TARGET), FUZZ_ARGS (extra libFuzzer
# flags, e.g. -jobs=2 or -rss_limit_mb=4096).
set -euo pipefail
target=payment_header
if [[ $# -gt 0 && ! $1 =~ ^[0-9]+$ ]]; then
  target=$1
  shift
fi
seconds=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${AGENTPAY_FUZZ_BUILD:-$root/build-fuzz}
case $target in
  payment_header | facilitator_body) dict=payment_header.dict ;;
  http_request | http_response | http_request_diff) dict=http.dict ;;
  serve_config) dict=serve_config.dict ;;
  admin_body) dict=admin_body.dict ;;
  *) echo "fuzz/run.sh: unknown target '$target'" >&2; exit 2 ;;
esac

launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
CC=clang CXX=clang++ cmake -S "$root/fuzz" -B "$build" -G Ninja "${launcher[@]}" >/dev/null
# The build dir ignores itself, so the repository's .gitignore needs no entry.
echo '*' >"$build/.gitignore"
ninja -C "$build" "${target}_fuzzer"

corpus=${FUZZ_CORPUS:-$build/corpus/$target}
artifacts=${FUZZ_ARTIFACTS:-$build/artifacts/$target}
mkdir -p "$corpus" "$artifacts"
seeds=("$root/fuzz/seeds/$target")
# The differential target starts from the request target's seeds as well (the same input layout).
if [[ $target == http_request_diff ]]; then seeds+=("$root/fuzz/seeds/http_request"); fi
if [[ $target == payment_header ]]; then
  seeds=()
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
fi

exec "$build/${target}_fuzzer" "$corpus" "${seeds[@]}" -max_total_time="$seconds" \
  -dict="$root/fuzz/$dict" -artifact_prefix="$artifacts/" -print_final_stats=1 ${FUZZ_ARGS:-}
