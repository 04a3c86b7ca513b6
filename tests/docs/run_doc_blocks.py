#!/usr/bin/env python3
"""Runs the shell examples of README.md and docs/*.md as a user would paste them, so a doc that
stops working fails a test (ctest `docs.blocks`).

Each markdown file gets a fresh scratch directory and ONE bash session; its ```sh blocks run in
order in that session, so variables, `cd` and background processes carry from block to block, as
in one terminal. In the scratch directory `build/agentpay` is a symlink to the binary under test
(docs write ./build/agentpay as users type it), `build/python` to the wheel's directory beside it, and `web`, `scripts`, `tests` link to the source
tree's directories of those names (read them, do not write into them).

Rules a block runs under:
  - bash with `set -e` (errexit; no pipefail, no nounset): the first command that fails ends the
    block, and the file, as failed. The session then stops: later blocks of that file are counted
    "not run", since they depend on the failed one. stdin is /dev/null.
  - each block has a time limit (--timeout, default 60 s); past it the block fails.
  - stdout and stderr of a block are captured together ("its output"). Output printed later by a
    background process it started stays in that block's output.
  - at the end of a file's session every process it started (its process group; this runner is
    the subreaper of anything that left it) gets SIGTERM, then SIGKILL after 10 s.

Markers, each an HTML comment on its own line right before a fence (several may be stacked):
  <!-- doc-test: skip (reason) -->  the block is not run; the reason is required.
  <!-- doc-test: expect "TEXT" -->  (repeatable, sh blocks) the block's output must contain TEXT.
  <!-- doc-test: file NAME -->      (non-sh blocks) the block's content is written to NAME in the
                                    scratch directory when the session reaches it.
A command meant for "a second terminal" is written with a trailing ` &` in the block.
A marker that is not followed by a fence, an unknown marker, a skip without a reason, a file
marker on an sh block or an indented ```sh fence is an error of the doc (reported as a failure).

Before anything runs, the TCP ports the run blocks name (127.0.0.1:PORT, localhost:PORT) and
8402-8405 must be free; the runner fails at once, naming the port, if one is not.

Prints per file "FILE: N passed, N failed, N not run, N skipped", failures with the file, the
block's line number, the block and its output, and one closing line "N passed, N failed" (blocks).
Exit status: 0 when every run block passed, 1 otherwise, 2 on a usage error.

Usage: run_doc_blocks.py --agentpay BUILD/agentpay [--root REPO] [--timeout S] [FILE.md ...]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_PORTS = (8402, 8403, 8404, 8405)
FENCE = re.compile(r"^(`{3,})\s*([A-Za-z0-9_+-]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
SKIP = re.compile(r"^skip\s*\((.*)\)$")
EXPECT = re.compile(r'^expect\s+"(.*)"$')
FILE = re.compile(r"^file\s+(\S+)$")
PORT = re.compile(r"(?:127\.0\.0\.1|localhost):(\d{2,5})\b")
KILL_GRACE_S = 10.0


@dataclass
class Block:
    path: str          # the markdown file, as shown
    line: int          # line number of the opening fence (1-based)
    lang: str
    text: str
    skip: str | None = None
    expects: list[str] = field(default_factory=list)
    file_name: str | None = None


class DocError(Exception):
    """A mistake in a doc's markers: reported as a failure of that file."""


def parse_blocks(path: Path, shown: str) -> list[Block]:
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    pending: list[tuple[int, str]] = []  # (line, marker body) waiting for the next fence
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = MARKER.match(line)
        fence = FENCE.match(line)
        if marker:
            pending.append((i + 1, marker.group(1)))
            i += 1
            continue
        if fence:
            ticks, lang = fence.group(1), fence.group(2)
            body: list[str] = []
            j = i + 1
            while j < len(lines) and not lines[j].startswith(ticks):
                body.append(lines[j])
                j += 1
            if j == len(lines):
                raise DocError(f"{shown}:{i + 1}: the fence opened here is never closed")
            block = Block(shown, i + 1, lang, "\n".join(body) + "\n")
            for at, text in pending:
                apply_marker(block, at, text)
            pending = []
            if block.file_name is None and lang != "sh" and block.expects:
                raise DocError(f"{shown}:{block.line}: expect is only for ```sh blocks")
            blocks.append(block)
            i = j + 1
            continue
        if re.match(r"^\s+`{3,}\s*sh\s*$", line):
            raise DocError(f"{shown}:{i + 1}: an indented ```sh fence would not be run; start it at "
                           "the beginning of the line")
        if pending and line.strip():
            at, text = pending[0]
            raise DocError(f"{shown}:{at}: marker '{text}' is not right before a fence")
        i += 1
    if pending:
        raise DocError(f"{shown}:{pending[0][0]}: marker '{pending[0][1]}' is not before a fence")
    return blocks


def apply_marker(block: Block, at: int, text: str) -> None:
    where = f"{block.path}:{at}"
    if m := SKIP.match(text):
        if not m.group(1).strip():
            raise DocError(f"{where}: a skip needs a reason: <!-- doc-test: skip (why) -->")
        block.skip = m.group(1).strip()
    elif m := EXPECT.match(text):
        block.expects.append(m.group(1))
    elif m := FILE.match(text):
        name = m.group(1)
        if block.lang == "sh":
            raise DocError(f"{where}: 'file' is for non-sh blocks (the sh block would not run)")
        if name.startswith("/") or ".." in Path(name).parts:
            raise DocError(f"{where}: file name must be relative, inside the scratch dir: {name}")
        block.file_name = name
    else:
        raise DocError(f"{where}: unknown marker '{text}' (skip (reason), expect \"TEXT\", file NAME)")


def port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            return True
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def become_subreaper() -> None:
    # Processes that a block starts and that outlive their parent are re-parented to us, so they
    # can be reaped and waited for instead of lingering on a port the next file needs.
    PR_SET_CHILD_SUBREAPER = 36
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def group_alive(pgid: int) -> bool:
    reap()
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def stop_group(pgid: int) -> None:
    for sig, wait_s in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not group_alive(pgid):
                return
            time.sleep(0.05)


def make_scratch(base: Path, root: Path, agentpay: Path, index: int) -> Path:
    scratch = base / f"file{index}"
    (scratch / "build").mkdir(parents=True)
    (scratch / "build" / "agentpay").symlink_to(agentpay)
    # The Python wheel the build made beside the binary (build/python/agentpay-*.whl).
    if (agentpay.parent / "python").is_dir():
        (scratch / "build" / "python").symlink_to(agentpay.parent / "python")
    for name in ("web", "scripts", "tests"):
        if (root / name).exists():
            (scratch / name).symlink_to(root / name)
    return scratch


def session_script(blocks: list[Block], control: Path) -> str:
    """The one bash script of a file: each step redirects the session's output to that step's file,
    runs it, and marks it done. set -e makes the first failing command end the session."""
    out = ["set -e", "exec </dev/null"]
    for n, block in enumerate(blocks):
        step = control / f"step{n}"
        out.append(f"exec >{step}.out 2>&1")
        out.append(f": > {step}.started")
        if block.file_name is not None:
            target = block.file_name
            out.append(f"mkdir -p \"$(dirname '{target}')\" && cp {step}.content '{target}'")
        else:
            out.append(f"source {step}.sh")
        out.append(f": > {step}.done")
    return "\n".join(out) + "\n"


def tail(text: str, lines: int = 200) -> str:
    parts = text.splitlines()
    if len(parts) <= lines:
        return text
    return f"[... {len(parts) - lines} earlier lines]\n" + "\n".join(parts[-lines:]) + "\n"


def report_failure(block: Block, why: str, output: str) -> None:
    print(f"\nFAIL {block.path}:{block.line}: {why}")
    print("---- block ----")
    print(block.text, end="")
    print("---- output ----")
    print(tail(output) if output else "(no output)", end="" if output.endswith("\n") else "\n")
    print("----")
    sys.stdout.flush()


def run_file(blocks: list[Block], scratch: Path, timeout_s: float) -> tuple[int, int, int, int]:
    """Returns (passed, failed, not_run, skipped)."""
    skipped = sum(1 for b in blocks if b.skip is not None)
    steps = [b for b in blocks if b.skip is None and (b.lang == "sh" or b.file_name is not None)]
    if not steps:
        return 0, 0, 0, skipped
    control = Path(tempfile.mkdtemp(prefix="ctl-", dir=scratch.parent))
    for n, block in enumerate(steps):
        name = "content" if block.file_name is not None else "sh"
        (control / f"step{n}.{name}").write_text(block.text, encoding="utf-8")
    (control / "session.sh").write_text(session_script(steps, control), encoding="utf-8")
    env = dict(os.environ)
    env.pop("BASH_ENV", None)
    env.pop("ENV", None)
    session = subprocess.Popen(["bash", "--noprofile", "--norc", str(control / "session.sh")],
                               cwd=scratch, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    pgid = session.pid
    passed = failed = 0
    try:
        for n, block in enumerate(steps):
            step = control / f"step{n}"
            started = time.monotonic()
            while not (step.with_suffix(".done")).exists():
                if session.poll() is not None and not step.with_suffix(".done").exists():
                    break
                if time.monotonic() - started > timeout_s:
                    break
                time.sleep(0.02)
            output_path = step.with_suffix(".out")
            output = output_path.read_text(errors="replace") if output_path.exists() else ""
            if not step.with_suffix(".done").exists():
                if session.poll() is None:
                    why = f"timed out after {timeout_s:g} s"
                elif not step.with_suffix(".started").exists():
                    why = "the session ended before this block"
                else:
                    why = f"a command failed (exit status {session.returncode})"
                report_failure(block, why, output)
                failed += 1
                break
            if block.file_name is None:
                missing = [e for e in block.expects if e not in output]
                if missing:
                    # Output may still be arriving from what the block started: give it a moment.
                    time.sleep(0.5)
                    output = output_path.read_text(errors="replace")
                    missing = [e for e in block.expects if e not in output]
                if missing:
                    report_failure(block, "expected text not in the output: " +
                                   ", ".join(repr(e) for e in missing), output)
                    failed += 1
                    break
            passed += 1
    finally:
        stop_group(pgid)
        try:
            session.wait(timeout=1)
        except (subprocess.TimeoutExpired, ChildProcessError):
            pass
        reap()
    not_run = len(steps) - passed - failed
    return passed, failed, not_run, skipped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agentpay", required=True, help="the built agentpay binary")
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[2]),
                        help="the source tree (default: this script's repository)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per block")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directories")
    parser.add_argument("files", nargs="*", help="markdown files (default README.md, docs/*.md)")
    args = parser.parse_args()

    root = Path(args.root).resolve()
    agentpay = Path(args.agentpay).resolve()
    if not os.access(agentpay, os.X_OK):
        print(f"run_doc_blocks: {agentpay} is not an executable", file=sys.stderr)
        return 2
    files = [Path(f).resolve() for f in args.files] or \
        [root / "README.md"] + sorted((root / "docs").glob("*.md"))

    parsed: list[tuple[str, list[Block] | DocError]] = []
    ports = set(DEFAULT_PORTS)
    for path in files:
        shown = os.path.relpath(path, root)
        try:
            blocks = parse_blocks(path, shown)
        except DocError as error:
            parsed.append((shown, error))
            continue
        parsed.append((shown, blocks))
        for block in blocks:
            if block.skip is None and (block.lang == "sh" or block.file_name):
                ports.update(int(p) for p in PORT.findall(block.text))
    # A run just before this one (ctest runs the docs' tests one after another) may still be
    # stopping its servers: they get a few seconds to let go of the ports.
    deadline = time.monotonic() + 10
    busy = sorted(p for p in ports if port_in_use(p))
    while busy and time.monotonic() < deadline:
        time.sleep(0.2)
        busy = sorted(p for p in ports if port_in_use(p))
    if busy:
        print("run_doc_blocks: port(s) " + ", ".join(map(str, busy)) + " on 127.0.0.1 are in use; "
              "the docs' examples need them free (stop what listens there, or run this test "
              "alone: it is RUN_SERIAL in ctest)")
        print("0 passed, 1 failed")
        return 1

    become_subreaper()
    base = Path(tempfile.mkdtemp(prefix="agentpay-doc-blocks-"))
    total_passed = total_failed = 0
    summary: list[str] = []
    try:
        for index, (shown, blocks) in enumerate(parsed):
            if isinstance(blocks, DocError):
                print(f"\nFAIL {blocks}")
                total_failed += 1
                summary.append(f"{shown}: marker error")
                continue
            scratch = make_scratch(base, root, agentpay, index)
            print(f"== {shown} (in {scratch})")
            sys.stdout.flush()
            passed, failed, not_run, skipped = run_file(blocks, scratch, args.timeout)
            total_passed += passed
            total_failed += failed
            summary.append(f"{shown}: {passed} passed, {failed} failed, {not_run} not run, "
                           f"{skipped} skipped")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print()
    for line in summary:
        print(line)
    print(f"{total_passed} passed, {total_failed} failed")
    return 0 if total_failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
