"""Anvil harness for AgentPay's Python tests (standard library only).

    from anvil import Anvil, deploy_test_usdc, mint, balance_of, ACCOUNTS

    with Anvil(chain_id=84532) as node:           # free port, waits for eth_chainId
        rpc = node.rpc
        token = deploy_test_usdc(rpc, "USDC", "2")
        mint(rpc, token, ACCOUNTS[1].address, 10_000_000)
        assert balance_of(rpc, token, ACCOUNTS[1].address) == 10_000_000

The Anvil binary comes from the pinned npm package (`bash tests/chain_env/install.sh`):
node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil. $ANVIL_BIN overrides it.

Python has no Keccak-256 (hashlib's sha3_256 is a different hash), so function selectors and
event topics are hardcoded below. Each was computed with viem's toFunctionSelector /
toEventSelector (viem 2.57.20) and selftest.py re-checks all of them against viem on every run.
Signing (EIP-712) is done by node: see sign_authorization() / sign_auth.mjs.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence
from urllib.parse import urlparse

HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE / "node_modules"
DEFAULT_ANVIL = NODE_MODULES / "@foundry-rs" / "anvil-linux-amd64" / "bin" / "anvil"


# --------------------------------------------------------------------------- accounts
@dataclass(frozen=True)
class Account:
    address: str  # EIP-55 checksummed
    private_key: str  # 0x-prefixed hex


# Anvil's default accounts (mnemonic "test test test test test test test test test test test
# junk", m/44'/60'/0'/0/i); checked against viem's mnemonicToAccount by selftest.py.
# They are unlocked in Anvil: eth_sendTransaction from them needs no signature.
ACCOUNTS = [
    Account("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
            "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"),
    Account("0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
            "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"),
    Account("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
            "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"),
    Account("0x90F79bf6EB2c4f870365E785982E1f101E93b906",
            "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6"),
    Account("0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65",
            "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a"),
    Account("0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc",
            "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba"),
    Account("0x976EA74026E726554dB657fA54763abd0C3a0aa9",
            "0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e"),
    Account("0x14dC79964da2C08b23698B3D3cc7Ca32193d9955",
            "0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356"),
    Account("0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f",
            "0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97"),
    Account("0xa0Ee7A142d267C1f36714E4a8F75612F20a79720",
            "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6"),
]

# --------------------------------------------------------------------------- selectors
# 4-byte selectors = keccak256(signature)[:4]; verified with viem (see module docstring).
SELECTORS = {
    "name()": "06fdde03",
    "symbol()": "95d89b41",
    "version()": "54fd4d50",
    "decimals()": "313ce567",
    "totalSupply()": "18160ddd",
    "balanceOf(address)": "70a08231",
    "allowance(address,address)": "dd62ed3e",
    "transfer(address,uint256)": "a9059cbb",
    "approve(address,uint256)": "095ea7b3",
    "transferFrom(address,address,uint256)": "23b872dd",
    "mint(address,uint256)": "40c10f19",
    "minter()": "07546172",
    "DOMAIN_SEPARATOR()": "3644e515",
    "TRANSFER_WITH_AUTHORIZATION_TYPEHASH()": "a0cc6a68",
    "authorizationState(address,bytes32)": "e94a0102",
    "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)": "e3ee160e",
    "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)": "cf092995",
    "receiveWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)": "ef55bec6",
    "receiveWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)": "88b7ab63",
    "cancelAuthorization(address,bytes32,uint8,bytes32,bytes32)": "5a049a70",
    "cancelAuthorization(address,bytes32,bytes)": "b7b72899",
}
ERROR_STRING_SELECTOR = "08c379a0"  # Error(string), the ABI of require(cond, "reason")

# keccak256 of the event signature; verified with viem (see module docstring).
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"  # Transfer(address,address,uint256)
APPROVAL_TOPIC = "0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925"  # Approval(address,address,uint256)
AUTHORIZATION_USED_TOPIC = "0x98de503528ee59b575ef0c0a2576a82497bfc029a5685b209e9ec333479b10a5"  # AuthorizationUsed(address,bytes32)
AUTHORIZATION_CANCELED_TOPIC = "0x1cdd46ff242716cdaa72d159d339a485b3438398348d68f09d7c8c0a59353d81"  # AuthorizationCanceled(address,bytes32)

TRANSFER_WITH_AUTHORIZATION_TYPEHASH = "0x7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a2267"

SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


# --------------------------------------------------------------------------- ABI encoding
def _word(n: int) -> bytes:
    return n.to_bytes(32, "big")


def _hexbytes(v: Any) -> bytes:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    s = str(v)
    return bytes.fromhex(s[2:] if s.startswith(("0x", "0X")) else s)


def _encode_static(t: str, v: Any) -> bytes:
    if t == "address":
        b = _hexbytes(v)
        if len(b) != 20:
            raise ValueError(f"bad address {v!r}")
        return b"\0" * 12 + b
    if t.startswith("uint"):
        n = int(v, 0) if isinstance(v, str) else int(v)
        if n < 0 or n >= 1 << 256:
            raise ValueError(f"{t} out of range: {v!r}")
        return _word(n)
    if t == "bool":
        return _word(1 if v else 0)
    if t == "bytes32":
        b = _hexbytes(v)
        if len(b) != 32:
            raise ValueError(f"bad bytes32 {v!r}")
        return b
    raise ValueError(f"unsupported ABI type {t}")


def abi_encode(types: Sequence[str], values: Sequence[Any]) -> bytes:
    """ABI-encode a tuple of address/uintN/bool/bytes32/bytes/string values."""
    if len(types) != len(values):
        raise ValueError("types and values differ in length")
    heads: list[bytes] = []
    tails: list[bytes] = []
    head_size = 32 * len(types)
    tail_size = 0
    for t, v in zip(types, values):
        if t in ("bytes", "string"):
            data = v.encode() if t == "string" else _hexbytes(v)
            padded = data + b"\0" * (-len(data) % 32)
            heads.append(_word(head_size + tail_size))
            tail = _word(len(data)) + padded
            tails.append(tail)
            tail_size += len(tail)
        else:
            heads.append(_encode_static(t, v))
    return b"".join(heads) + b"".join(tails)


def calldata(signature: str, *args: Any) -> str:
    """0x-hex calldata for `signature` (must be in SELECTORS) with `args`."""
    types = signature[signature.index("(") + 1:-1]
    type_list = [t for t in types.split(",") if t]
    return "0x" + SELECTORS[signature] + abi_encode(type_list, args).hex()


def decode_uint(data: str, index: int = 0) -> int:
    raw = data[2:] if data.startswith("0x") else data
    return int(raw[64 * index:64 * (index + 1)], 16)


def decode_address(data: str, index: int = 0) -> str:
    raw = data[2:] if data.startswith("0x") else data
    return "0x" + raw[64 * index + 24:64 * (index + 1)]


def decode_string(data: str) -> str:
    """Decode a single ABI-encoded `string` return value."""
    raw = _hexbytes(data)
    off = int.from_bytes(raw[0:32], "big")
    n = int.from_bytes(raw[off:off + 32], "big")
    return raw[off + 32:off + 32 + n].decode()


def decode_revert_reason(data: str | None) -> str | None:
    """Error(string) revert data -> the reason string (None for other data)."""
    if not data or not isinstance(data, str):
        return None
    raw = data[2:] if data.startswith("0x") else data
    if not raw.startswith(ERROR_STRING_SELECTOR):
        return None
    try:
        return decode_string("0x" + raw[8:])
    except Exception:  # noqa: BLE001 - malformed revert data
        return None


def to_hex(n: int) -> str:
    return hex(int(n))


# --------------------------------------------------------------------------- JSON-RPC
class RpcError(Exception):
    """A JSON-RPC error answer. `reason` is the decoded revert string when there is one."""

    def __init__(self, method: str, error: dict):
        self.method = method
        self.code = error.get("code")
        self.message = error.get("message", "")
        self.data = error.get("data")
        data_hex = self.data if isinstance(self.data, str) else (
            self.data.get("data") if isinstance(self.data, dict) else None)
        self.reason = decode_revert_reason(data_hex)
        super().__init__(f"{method}: {self.code} {self.message}" + (f" ({self.reason})" if self.reason else ""))


class Rpc:
    """Minimal JSON-RPC 2.0 client over keep-alive HTTP (one connection per thread)."""

    def __init__(self, url: str, timeout: float = 30.0):
        self.url = url
        u = urlparse(url)
        self._host = u.hostname or "127.0.0.1"
        self._port = u.port or 80
        self._path = u.path or "/"
        self.timeout = timeout
        self._local = threading.local()
        self._ids = 0
        self._id_lock = threading.Lock()

    def _conn(self) -> http.client.HTTPConnection:
        c = getattr(self._local, "conn", None)
        if c is None:
            c = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
            self._local.conn = c
        return c

    def _drop_conn(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
            self._local.conn = None

    def close(self) -> None:
        self._drop_conn()

    def call(self, method: str, *params: Any) -> Any:
        with self._id_lock:
            self._ids += 1
            req_id = self._ids
        body = json.dumps({"jsonrpc": "2.0", "id": req_id, "method": method, "params": list(params)})
        for attempt in (0, 1):
            try:
                c = self._conn()
                c.request("POST", self._path, body=body, headers={"Content-Type": "application/json"})
                resp = c.getresponse()
                raw = resp.read()
                break
            except (ConnectionError, http.client.HTTPException, OSError):
                # stale keep-alive connection (e.g. node restarted): retry once on a fresh one
                self._drop_conn()
                if attempt:
                    raise
        msg = json.loads(raw)
        if "error" in msg and msg["error"] is not None:
            raise RpcError(method, msg["error"])
        return msg.get("result")

    # -- chain basics
    def chain_id(self) -> int:
        return int(self.call("eth_chainId"), 16)

    def block_number(self) -> int:
        return int(self.call("eth_blockNumber"), 16)

    def block(self, tag: str | int = "latest") -> dict:
        t = hex(tag) if isinstance(tag, int) else tag
        return self.call("eth_getBlockByNumber", t, False)

    def block_timestamp(self, tag: str | int = "latest") -> int:
        return int(self.block(tag)["timestamp"], 16)

    def eth_call(self, to: str, data: str, from_: str | None = None, block: str = "latest") -> str:
        tx = {"to": to, "data": data}
        if from_:
            tx["from"] = from_
        return self.call("eth_call", tx, block)

    def send_transaction(self, from_: str, to: str | None, data: str = "0x", value: int = 0,
                         gas: int | None = None) -> str:
        """eth_sendTransaction from an unlocked account; returns the tx hash.

        Anvil 1.7.1 sends a reverting transaction anyway (gas estimation failure is not an error
        here): it is mined with receipt status 0x0. Use revert_reason() (eth_call) to learn why.
        """
        tx: dict[str, Any] = {"from": from_, "data": data}
        if to:
            tx["to"] = to
        if value:
            tx["value"] = hex(value)
        if gas is not None:
            tx["gas"] = hex(gas)
        return self.call("eth_sendTransaction", tx)

    def revert_reason(self, to: str, data: str, from_: str | None = None) -> str | None:
        """eth_call `data`: None if it would succeed, else the revert string (or the RPC message)."""
        try:
            self.eth_call(to, data, from_=from_)
            return None
        except RpcError as e:
            return e.reason or e.message

    def receipt(self, tx_hash: str) -> dict | None:
        return self.call("eth_getTransactionReceipt", tx_hash)

    def wait_receipt(self, tx_hash: str, timeout: float = 10.0, poll: float = 0.01,
                     mine_if_manual: bool = False) -> dict:
        """Poll for a receipt. With mine_if_manual and automine off, mines a block first."""
        if mine_if_manual and not self.get_automine():
            self.mine()
        deadline = time.monotonic() + timeout
        while True:
            r = self.receipt(tx_hash)
            if r is not None:
                return r
            if time.monotonic() > deadline:
                raise TimeoutError(f"no receipt for {tx_hash} after {timeout}s")
            time.sleep(poll)

    def transact(self, from_: str, to: str | None, data: str = "0x", value: int = 0,
                 gas: int | None = None, timeout: float = 10.0) -> dict:
        """send_transaction + wait_receipt (mining a block if automine is off)."""
        h = self.send_transaction(from_, to, data, value, gas)
        return self.wait_receipt(h, timeout=timeout, mine_if_manual=True)

    def get_logs(self, address: str | None = None, topics: list | None = None,
                 from_block: int | str = 0, to_block: int | str = "latest") -> list[dict]:
        f: dict[str, Any] = {
            "fromBlock": hex(from_block) if isinstance(from_block, int) else from_block,
            "toBlock": hex(to_block) if isinstance(to_block, int) else to_block,
        }
        if address:
            f["address"] = address
        if topics is not None:
            f["topics"] = topics
        return self.call("eth_getLogs", f)

    # -- Anvil fault controls
    def get_automine(self) -> bool:
        return bool(self.call("anvil_getAutomine"))

    def set_automine(self, on: bool) -> None:
        """anvil_setAutomine: off = transactions wait in the pool (receipt null) until mine()."""
        self.call("anvil_setAutomine", bool(on))

    def set_interval_mining(self, seconds: int) -> None:
        """evm_setIntervalMining: mine a block every N seconds (0 disables)."""
        self.call("evm_setIntervalMining", int(seconds))

    def mine(self, blocks: int = 1) -> None:
        """Mine `blocks` blocks (evm_mine once per block)."""
        for _ in range(blocks):
            self.call("evm_mine")

    def drop_transaction(self, tx_hash: str) -> None:
        """anvil_dropTransaction: remove a pending tx from the pool (only while not yet mined)."""
        self.call("anvil_dropTransaction", tx_hash)

    def txpool_status(self) -> dict:
        """txpool_status -> {"pending": n, "queued": n} (Anvil has no eth_pendingTransactions)."""
        st = self.call("txpool_status")
        return {k: int(v, 16) if isinstance(v, str) else int(v) for k, v in st.items()}

    def pending_count(self) -> int:
        return self.txpool_status()["pending"]

    def snapshot(self) -> str:
        """evm_snapshot -> id. revert(id) restores state, block height and time."""
        return self.call("evm_snapshot")

    def revert(self, snapshot_id: str) -> bool:
        """evm_revert: True if the snapshot existed. A snapshot can be reverted to only once."""
        return bool(self.call("evm_revert", snapshot_id))

    def increase_time(self, seconds: int) -> int:
        """evm_increaseTime: applies to the NEXT block; mine() to make it visible.

        Chain time does not come back: take a snapshot first and revert, or every later
        `now + N` authorization signed from the machine clock is already expired on chain.
        """
        return int(self.call("evm_increaseTime", int(seconds)) or 0)

    def set_next_block_timestamp(self, ts: int) -> None:
        self.call("evm_setNextBlockTimestamp", int(ts))

    def reorg(self, depth: int) -> None:
        """anvil_reorg [depth, []]: replace the last `depth` blocks with new (empty) ones; re-check
        receipts afterwards rather than assuming what happened to the old blocks' transactions."""
        self.call("anvil_reorg", int(depth), [])


# --------------------------------------------------------------------------- Anvil process
def _free_port(host: str = "127.0.0.1") -> int:
    """A port reserved against other test processes and outgoing connections (tests/testports.py)."""
    tests_dir = str(Path(__file__).resolve().parent.parent)
    if tests_dir not in sys.path:
        sys.path.insert(0, tests_dir)
    import testports
    return testports.reserve(host)


def anvil_binary() -> str:
    env = os.environ.get("ANVIL_BIN")
    if env:
        return env
    if DEFAULT_ANVIL.exists():
        return str(DEFAULT_ANVIL)
    found = shutil.which("anvil")
    if found:
        return found
    raise FileNotFoundError(
        f"anvil not found at {DEFAULT_ANVIL}; run `bash {HERE / 'install.sh'}` (or set ANVIL_BIN)")


class Anvil:
    """An Anvil process on a free loopback port.

    chain_id:   --chain-id (84532 = Base Sepolia, needed for v1 clients' "base-sepolia")
    automine:   False -> --no-mining (transactions stay pending until rpc.mine())
    block_time: --block-time N seconds (interval mining; automine off)
    extra_args: more anvil flags, e.g. ["--prune-history"]
    """

    def __init__(self, chain_id: int = 31337, automine: bool = True, block_time: float | None = None,
                 port: int | None = None, host: str = "127.0.0.1", extra_args: Iterable[str] = (),
                 binary: str | None = None, log_path: str | os.PathLike | None = None,
                 start_timeout: float = 15.0):
        self.chain_id = chain_id
        self.automine = automine
        self.block_time = block_time
        self.host = host
        self.port = port
        self.extra_args = list(extra_args)
        self.binary = binary or anvil_binary()
        self.log_path = Path(log_path) if log_path else None
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.rpc: Rpc | None = None
        self._log_file = None
        self._tmp_log = None
        self._home = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def _args(self) -> list[str]:
        args = [self.binary, "--host", self.host, "--port", str(self.port),
                "--chain-id", str(self.chain_id)]
        if self.block_time is not None:
            args += ["--block-time", str(self.block_time)]
        elif not self.automine:
            args.append("--no-mining")
        return args + self.extra_args

    def log_tail(self, n: int = 4000) -> str:
        path = self.log_path or (Path(self._tmp_log) if self._tmp_log else None)
        if not path or not path.exists():
            return ""
        return path.read_text(errors="replace")[-n:]

    def start(self) -> "Anvil":
        fixed_port = self.port is not None
        last_err = ""
        for _attempt in range(3 if not fixed_port else 1):
            if not fixed_port:
                self.port = _free_port(self.host)
            if self.log_path is None:
                fd, self._tmp_log = tempfile.mkstemp(prefix="anvil-", suffix=".log")
                os.close(fd)
            self._log_file = open(self.log_path or self._tmp_log, "wb")
            # Anvil writes the state of past blocks under $HOME/.foundry/anvil/tmp (about 1.5 GB for
            # a bench phase of 3,500 blocks) and leaves it there when it exits: a home of its own,
            # removed by stop(), keeps a day of test and bench runs from filling the disk.
            self._home = tempfile.mkdtemp(prefix="anvil-home-")
            self.proc = subprocess.Popen(self._args(), stdout=self._log_file, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env={**os.environ, "HOME": self._home})
            self.rpc = Rpc(self.url)
            deadline = time.monotonic() + self.start_timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    if self.rpc.chain_id() == self.chain_id:
                        return self
                except (OSError, http.client.HTTPException, RpcError, ValueError):
                    pass
                time.sleep(0.01)
            last_err = self.log_tail()
            self.stop()
        raise RuntimeError(f"anvil did not start on {self.host}:{self.port}: {last_err}")

    def stop(self) -> None:
        """SIGTERM, wait up to 3 s, then SIGKILL. Returns when the process is gone (port free)."""
        if self.rpc:
            self.rpc.close()
        p = self.proc
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGCONT)  # in case a test left it stopped
            p.terminate()
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.proc = None
        if self._log_file:
            self._log_file.close()
            self._log_file = None
        if self._tmp_log and not self.log_path:
            try:
                os.unlink(self._tmp_log)
            except OSError:
                pass
            self._tmp_log = None
        if self._home:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None

    def pause(self) -> None:
        """SIGSTOP: the RPC hangs (connections accepted by the kernel, never answered)."""
        assert self.proc
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc
        self.proc.send_signal(signal.SIGCONT)

    def __enter__(self) -> "Anvil":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# --------------------------------------------------------------------------- TestUSDC
def load_artifact(name: str = "TestUSDC", check_fresh: bool = True) -> dict:
    """artifacts/<name>.json; refuses one compiled from a different contracts/<name>.sol."""
    path = HERE / "artifacts" / f"{name}.json"
    source = HERE / "contracts" / f"{name}.sol"
    art = json.loads(path.read_text())
    if check_fresh and source.exists():
        import hashlib
        if hashlib.sha256(source.read_bytes()).hexdigest() != art.get("sourceSha256"):
            raise RuntimeError(f"{path} is stale: run `node {HERE / 'compile.mjs'}`")
    return art


MULTICALL3_ADDRESS = "0xcA11bde05977b3631167028862bE2a173976CA11"


def install_multicall3(rpc: Rpc) -> bool:
    """Put Multicall3Lite (tryAggregate/aggregate3) at the canonical Multicall3 address if empty.

    The x402 reference facilitator diagnoses a failed simulation through Multicall3; on a bare
    Anvil it then reports every failure as invalid_exact_evm_transaction_simulation_failed
    instead of ..._nonce_already_used / ..._insufficient_balance / ..._token_name_mismatch.
    Returns True if it installed the code. (reference_server.mjs does this itself.)
    """
    if rpc.call("eth_getCode", MULTICALL3_ADDRESS, "latest") not in ("0x", None):
        return False
    rpc.call("anvil_setCode", MULTICALL3_ADDRESS, load_artifact("Multicall3Lite")["deployedBytecode"])
    return True


def deploy_test_usdc(rpc: Rpc, name: str = "USD Coin", version: str = "2", symbol: str = "USDC",
                     deployer: str | None = None) -> str:
    """Deploy TestUSDC (name = EIP-712 domain name) from Anvil account #0; returns its address.

    Works with automine off too (mines one block). The deployer is the only minter.
    """
    art = load_artifact()
    data = art["bytecode"] + abi_encode(["string", "string", "string"], [name, symbol, version]).hex()
    r = rpc.transact(deployer or ACCOUNTS[0].address, None, data)
    if int(r["status"], 16) != 1 or not r.get("contractAddress"):
        raise RuntimeError(f"TestUSDC deployment failed: {r}")
    return r["contractAddress"]


def mint(rpc: Rpc, token: str, to: str, amount: int, minter: str | None = None) -> dict:
    """mint(to, amount) from the deployer (account #0 by default); returns the receipt."""
    r = rpc.transact(minter or ACCOUNTS[0].address, token, calldata("mint(address,uint256)", to, amount))
    if int(r["status"], 16) != 1:
        raise RuntimeError(f"mint failed: {r}")
    return r


def balance_of(rpc: Rpc, token: str, who: str, block: str = "latest") -> int:
    return decode_uint(rpc.eth_call(token, calldata("balanceOf(address)", who), block=block))


def total_supply(rpc: Rpc, token: str) -> int:
    return decode_uint(rpc.eth_call(token, calldata("totalSupply()")))


def token_name(rpc: Rpc, token: str) -> str:
    return decode_string(rpc.eth_call(token, calldata("name()")))


def token_version(rpc: Rpc, token: str) -> str:
    return decode_string(rpc.eth_call(token, calldata("version()")))


def domain_separator(rpc: Rpc, token: str) -> str:
    return rpc.eth_call(token, calldata("DOMAIN_SEPARATOR()"))


def authorization_state(rpc: Rpc, token: str, authorizer: str, nonce: str) -> bool:
    """authorizationState(authorizer, nonce): True once used (or canceled)."""
    return decode_uint(rpc.eth_call(token, calldata("authorizationState(address,bytes32)", authorizer, nonce))) != 0


def split_signature(signature: str) -> tuple[int, str, str]:
    """65-byte r‖s‖v hex -> (v, r, s), with v normalised to 27/28."""
    raw = _hexbytes(signature)
    if len(raw) != 65:
        raise ValueError("signature must be 65 bytes")
    v = raw[64]
    if v < 27:
        v += 27
    return v, "0x" + raw[:32].hex(), "0x" + raw[32:64].hex()


def high_s_twin(signature: str) -> str:
    """The malleable twin (n - s, flipped v) of a signature: ecrecover still yields the
    signer, but USDC-like tokens must reject it ("ECRecover: invalid signature 's' value")."""
    v, r, s = split_signature(signature)
    s2 = SECP256K1_N - int(s, 16)
    v2 = 28 if v == 27 else 27
    return r + s2.to_bytes(32, "big").hex() + bytes([v2]).hex()


def transfer_with_authorization_calldata(auth: dict, signature: str, split: bool = True) -> str:
    """Calldata for transferWithAuthorization; split=True -> (v,r,s) overload 0xe3ee160e,
    split=False -> (bytes signature) overload 0xcf092995. `auth` has from,to,value,validAfter,
    validBefore,nonce (ints or decimal strings, as in an x402 payload)."""
    base = [auth["from"], auth["to"], int(auth["value"]), int(auth["validAfter"]),
            int(auth["validBefore"]), auth["nonce"]]
    if split:
        v, r, s = split_signature(signature)
        return calldata("transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)",
                        *base, v, r, s)
    return calldata("transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)",
                    *base, signature)


def transfer_with_authorization(rpc: Rpc, token: str, auth: dict, signature: str, split: bool = True,
                                sender: str | None = None, gas: int | None = None) -> dict:
    """Submit transferWithAuthorization from `sender` (account #0) and return the receipt.

    A reverting call is still mined (receipt status 0x0); see simulate_transfer_with_authorization."""
    return rpc.transact(sender or ACCOUNTS[0].address, token,
                        transfer_with_authorization_calldata(auth, signature, split), gas=gas)


def simulate_transfer_with_authorization(rpc: Rpc, token: str, auth: dict, signature: str, split: bool = True,
                                         sender: str | None = None) -> str | None:
    """eth_call transferWithAuthorization: None if it would succeed, else the revert reason
    (e.g. "FiatTokenV2: authorization is used or canceled")."""
    return rpc.revert_reason(token, transfer_with_authorization_calldata(auth, signature, split),
                             from_=sender or ACCOUNTS[0].address)


def transfer_logs(rpc: Rpc, token: str, from_: str | None = None, to: str | None = None,
                  from_block: int | str = 0, to_block: int | str = "latest") -> list[dict]:
    """Transfer events of `token`, decoded to {from, to, value, tx, block} (addresses lowercase)."""
    topics: list[Any] = [TRANSFER_TOPIC,
                         ("0x" + "0" * 24 + from_[2:].lower()) if from_ else None,
                         ("0x" + "0" * 24 + to[2:].lower()) if to else None]
    while topics and topics[-1] is None:
        topics.pop()
    out = []
    for lg in rpc.get_logs(token, topics, from_block, to_block):
        out.append({
            "from": "0x" + lg["topics"][1][-40:],
            "to": "0x" + lg["topics"][2][-40:],
            "value": int(lg["data"], 16),
            "tx": lg["transactionHash"],
            "block": int(lg["blockNumber"], 16),
        })
    return out


def count_transfer_logs(rpc: Rpc, token: str, from_: str | None = None, to: str | None = None,
                        from_block: int | str = 0, to_block: int | str = "latest") -> int:
    """Number of Transfer events of `token` (mints included unless from_ is given)."""
    return len(transfer_logs(rpc, token, from_, to, from_block, to_block))


# --------------------------------------------------------------------------- signing via node
def sign_authorization(requests: dict | list[dict], timeout: float = 60.0) -> dict | list[dict]:
    """EIP-712-sign TransferWithAuthorization (or Receive/Cancel) with viem via sign_auth.mjs.

    One request: {privateKey, domain:{name,version,chainId,verifyingContract},
                  message:{to,value,validAfter,validBefore,nonce?}, primaryType?}
    (message.from defaults to the key's address; nonce defaults to 32 random bytes).
    Returns {signature, v, r, s, digest, from, message} (a list for a list: one node start).
    """
    out = subprocess.run(["node", str(HERE / "sign_auth.mjs")], input=json.dumps(requests),
                         capture_output=True, text=True, timeout=timeout, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"sign_auth.mjs failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def random_nonce() -> str:
    return "0x" + os.urandom(32).hex()
