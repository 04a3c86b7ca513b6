#!/usr/bin/env bash
# ctest's python.venv fixture: a virtual environment of Debian's Python that sees its site
# packages (httpx, requests, pytest from scripts/bootstrap.sh) with the agentpay wheel the build
# made installed into it, as docs/python.md tells a user to install it (no network, no build step).
# Usage: make_venv.sh PYTHON WHEEL VENV_DIR
set -euo pipefail
python=$1 wheel=$2 venv=$3
rm -rf "$venv"
"$python" -m venv --system-site-packages "$venv"
"$venv/bin/pip" install --quiet --no-index --disable-pip-version-check "$wheel"
"$venv/bin/python" -c 'import agentpay, sys; print("agentpay", agentpay.version(), "in", sys.prefix)'
