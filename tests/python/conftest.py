"""pytest for the agentpay Python package (python/, docs/python.md). The suites run the installed
wheel (ctest's python.venv fixture: build/python/venv, Debian's Python with its site packages for
httpx, requests and pytest) against real processes through the integration harness: Anvil with
TestUSDC, the demo seller, `agentpay serve`, the reference x402 server. AGENTPAY_BIN names the
agentpay binary (the CLI processes, the gateway)."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
sys.path.insert(1, os.path.join(os.path.dirname(HERE), "fault"))
