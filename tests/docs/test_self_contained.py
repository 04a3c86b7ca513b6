#!/usr/bin/env python3
"""The user-facing text stands on its own (ctest `docs.self_contained`).

README.md, docs/*.md and the --help of every (sub-)subcommand of the binary must not send a user to
things a user does not have: files outside the repository (../shared, CONTRACT, MODEL.md, NOTES,
DESIGN.md), machine paths (/work/, /root/, /home/) or issue numbers ("issue 4", "#12", "the open
issues"). And the references cannot drift from the code: every long flag any --help lists appears in
docs/cli.md, and every problem `code` the source can answer with appears in the HTTP reference
(docs/protocol.md).

Run: python3 tests/docs/test_self_contained.py --agentpay build/src/agentpay
"""

import argparse
import re
import subprocess
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AGENTPAY = ""
HTTP_REFERENCE = ROOT / "docs" / "protocol.md"
CLI_REFERENCE = ROOT / "docs" / "cli.md"

FORBIDDEN = [
    (re.compile(r"\.\./shared"), "../shared"),
    (re.compile(r"\bCONTRACT\b"), "CONTRACT"),
    (re.compile(r"\bMODEL\.md\b"), "MODEL.md"),
    (re.compile(r"\bNOTES\b"), "NOTES"),
    (re.compile(r"\bDESIGN(\.md)?\b"), "DESIGN"),
    (re.compile(r"/work/|/root/|/home/"), "an absolute machine path"),
    (re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE), "an issue number"),
    (re.compile(r"(?<![\w&(/])#\d+\b"), "an issue number"),
    (re.compile(r"\bopen issues?\b", re.IGNORECASE), "the open issues"),
]


def user_docs() -> list[Path]:
    return [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def help_text(command: list[str]) -> str:
    result = subprocess.run([AGENTPAY, *command, "--help"], capture_output=True, text=True,
                            timeout=30)
    if result.returncode != 0:
        raise AssertionError(f"agentpay {' '.join(command)} --help exited {result.returncode}:\n"
                             f"{result.stderr}")
    return result.stdout + result.stderr


def subcommands_of(text: str) -> list[str]:
    """The names listed under CLI11's "Subcommands:" heading."""
    names: list[str] = []
    in_section = False
    for line in text.splitlines():
        if re.match(r"^[A-Za-z][A-Za-z ]*:\s*$", line):
            in_section = line.strip().rstrip(":").lower() == "subcommands"
            continue
        if in_section:
            m = re.match(r"^  (\S+)(\s|$)", line)
            if m:
                names.append(m.group(1))
    return names


def all_help() -> dict[str, str]:
    """`agentpay ... --help` of every command reachable from the top, by command line."""
    found: dict[str, str] = {}
    todo: list[list[str]] = [[]]
    while todo:
        command = todo.pop()
        text = help_text(command)
        found[" ".join(["agentpay", *command])] = text
        for name in subcommands_of(text):
            todo.append([*command, name])
    return found


PROBLEM_CODE_TABLE = ROOT / "src" / "core" / "problem.h"


def problem_code_table() -> dict[str, str]:
    """The ProblemCode enumerators and their wire strings, from ProblemCodeName's table."""
    text = PROBLEM_CODE_TABLE.read_text(encoding="utf-8")
    enum = re.search(r"enum class ProblemCode\b[^{]*\{(.*?)\};", text, re.S)
    if enum is None:
        raise AssertionError(f"no `enum class ProblemCode` in {PROBLEM_CODE_TABLE}")
    enumerators = re.findall(r"\b(k[A-Z]\w*)\b", re.sub(r"//[^\n]*", "", enum.group(1)))
    table = dict(re.findall(r'case ProblemCode::(k\w+):\s*return\s+"([a-z][a-z0-9_]*)";', text))
    # The parse itself is checked: every enumerator has exactly one row, and no row is extra.
    if sorted(enumerators) != sorted(table) or len(set(enumerators)) != len(enumerators):
        raise AssertionError(f"ProblemCodeName's table does not match the enum: "
                             f"enum {sorted(enumerators)}, table {sorted(table)}")
    return table


def source_problem_codes() -> set[str]:
    """Problem codes the gateway, the CLI's HTTP handlers and the x402 verifier can answer with."""
    # ProblemResponse, PendingAnswer and settlement's Problem take a ProblemCode: every code they
    # can answer with is a row of the one table.
    codes: set[str] = set(problem_code_table().values())
    literal = r'"([a-z][a-z0-9_]*)"'
    for path in (ROOT / "src").rglob("*.cc"):
        text = path.read_text(encoding="utf-8")
        # A string literal passed as a code would not compile today; should a string-taking
        # overload come back, ProblemResponse(status, "code", ...) and Problem(status, "code", ...)
        # still count (a code chosen by a ternary gives both of its literals).
        for m in re.finditer(r"\b(?:ProblemResponse|Problem)\(\s*\d+\s*,\s*([^,]*?),", text, re.S):
            arg = m.group(1)
            if arg.startswith('"'):
                codes.update(re.findall(literal, arg))
            elif "?" in arg:
                codes.update(re.findall(r"[?:]\s*" + literal, arg))
        # PendingAnswer(op, status, "code", ...)
        codes.update(re.findall(r"PendingAnswer\([^,]+,[^,]+,\s*" + literal, text))
        # Challenge(..., "code") default and the x402 reason table (x402::ReasonCode).
        codes.update(re.findall(r'std::string_view code = ' + literal, text))
        if path.name == "verify.cc":
            codes.update(re.findall(r'return\s+(?:version == Version::kV1 \?\s*)?' + literal, text))
            codes.update(re.findall(r':\s*' + literal + r';', text))
    for path in (ROOT / "src").rglob("*.h"):
        codes.update(re.findall(r'std::string_view code = ' + literal, path.read_text()))
    return codes


class SelfContained(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.help = all_help()

    def test_help_tree_is_complete(self):
        # The walk found the commands users are told about; a broken parse would find nothing.
        for command in ["agentpay serve", "agentpay seller", "agentpay admin",
                        "agentpay admin create-account", "agentpay admin resolve", "agentpay pay",
                        "agentpay pay budget", "agentpay pay reconcile", "agentpay sim"]:
            self.assertIn(command, self.help)

    def test_no_reference_a_user_cannot_follow(self):
        texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in user_docs()}
        texts.update({f"`{cmd} --help`": text for cmd, text in self.help.items()})
        problems = []
        for where, text in texts.items():
            for number, line in enumerate(text.splitlines(), 1):
                for pattern, what in FORBIDDEN:
                    if pattern.search(line):
                        problems.append(f"{where}:{number}: {what}: {line.strip()}")
        self.assertEqual(problems, [], "\n" + "\n".join(problems))

    def test_every_flag_is_in_the_cli_reference(self):
        reference = CLI_REFERENCE.read_text(encoding="utf-8")
        documented = set(re.findall(r"--[a-z0-9][a-z0-9-]*", reference))
        missing = []
        for command, text in sorted(self.help.items()):
            for flag in sorted(set(re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", text))):
                if flag not in documented:
                    missing.append(f"{command}: {flag}")
        self.assertEqual(missing, [], "flags missing from docs/cli.md:\n" + "\n".join(missing))

    def test_every_problem_code_is_in_the_http_reference(self):
        codes = source_problem_codes()
        # The extraction itself is checked: these are answered on every gateway.
        for known in ["payment_required", "unauthorized", "idempotency_key_mismatch",
                      "operation_in_progress", "fulfillment_pending", "limit_exceeded",
                      "store_unavailable", "invalid_exact_evm_signature", "settlement_void"]:
            self.assertIn(known, codes)
        reference = HTTP_REFERENCE.read_text(encoding="utf-8")
        missing = sorted(c for c in codes if f"`{c}`" not in reference)
        self.assertEqual(missing, [], "problem codes missing from docs/protocol.md: " +
                         ", ".join(missing))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--agentpay", required=True)
    args, rest = parser.parse_known_args()
    AGENTPAY = str(Path(args.agentpay).resolve())
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
