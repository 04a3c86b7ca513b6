#!/usr/bin/env python3
"""Checks that every source file under src/ keeps to the layering of docs/architecture.md.

usage: scripts/check-layers.py [REPO_ROOT]      (exit 0: no breach; 1: breaches, one a line)

Each folder of src/ is a layer, and a layer may include only the layers its rule names. The check
follows includes through the headers of a file's own layer: a file that includes a header of its
layer which (at any depth) includes a layer the file may not is a breach too, and the report gives
the chain of includes that gets there. A header of another, allowed layer is not followed: that
layer's own files answer to its own rule. Public headers under include/ are followed like the
including file's own. Two rules of the design go beyond includes: core reaches no outside world
(no library but the standard one and nlohmann/json, and no clock, randomness, threads, files or
environment), and gateway and workers, and the settlement code they share, read no clock and never
sleep (time comes in from the shell).
A folder of src/ with no rule here is itself a breach, so a new layer cannot slip in unchecked.
"""
import os
import re
import sys

LAYERS = ["core", "sqlite", "store", "http", "chain", "x402", "settlement", "gateway", "workers",
          "client", "sim", "cli"]


def everything_but(*excluded):
    return frozenset(LAYERS) - frozenset(excluded)


# Layer -> the other layers it may include (its own always). The wording follows the design:
# "only X" lists, "anything but X" excludes. cli is the top: only cli includes cli.
MAY_INCLUDE = {
    "core": frozenset(),
    "sqlite": frozenset({"core"}),
    # The SQLite wrapper is a leaf the store, the devnet (chain) and the budget file (client) share.
    "store": frozenset({"core", "sqlite"}),
    "http": frozenset({"core"}),
    "chain": frozenset({"core", "http", "sqlite"}),
    "x402": frozenset({"core", "chain"}),
    "settlement": everything_but("http", "gateway", "workers", "cli", "client", "sim"),
    "gateway": everything_but("cli", "client", "sim", "workers"),
    "workers": everything_but("gateway", "cli", "client", "sim"),
    "client": everything_but("cli", "gateway", "workers", "sim"),
    "sim": everything_but("cli", "http"),
    "cli": frozenset(LAYERS),
}

# Standard headers that bring the world in (threads, clocks, randomness, files, streams, signals).
WORLDLY_STANDARD_HEADERS = {
    "thread", "mutex", "shared_mutex", "condition_variable", "future", "stop_token", "semaphore",
    "latch", "barrier", "random", "chrono", "ctime", "fstream", "filesystem", "iostream", "csignal",
}
# The one outside library core may use: JSON is computation, not I/O.
CORE_OUTSIDE_HEADERS = {"nlohmann/json.hpp"}
CLOCK_AND_SLEEP = [r"\b(system_clock|steady_clock|high_resolution_clock)::now\b",
                   r"\bsleep_(for|until)\b", r"\bclock_gettime\s*\(", r"\bgettimeofday\s*\("]
WORLD_CALLS = CLOCK_AND_SLEEP + [r"\brandom_device\b", r"\bstd::thread\b", r"\bstd::jthread\b",
                                 r"(?<![\w:.])rand\s*\(", r"\bgetenv\s*\(", r"\bfopen\s*\(",
                                 r"\bstd::[io]?fstream\b"]
# settlement runs inside the gateway and the workers (it is what they share), so it keeps their rule.
BANNED_CALLS = {"core": WORLD_CALLS, "gateway": CLOCK_AND_SLEEP, "workers": CLOCK_AND_SLEEP,
                "settlement": CLOCK_AND_SLEEP}

SOURCE_SUFFIXES = (".h", ".hh", ".hpp", ".cc", ".cpp", ".cxx", ".ipp")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.M)


def strip_comments(text):
    """The text with comments blanked out and its line breaks kept (so line numbers still hold)."""
    def blank(match):
        return re.sub(r"[^\n]", " ", match.group(0))
    # Literals are matched so that a "//" inside one is not taken for a comment; they are kept.
    pattern = r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''
    return re.sub(pattern, lambda m: m.group(0) if m.group(0)[0] in "\"'" else blank(m), text,
                  flags=re.S)


class Tree:
    def __init__(self, root):
        self.root = root
        self.src = os.path.join(root, "src")
        self.public = os.path.join(root, "include")
        self._includes = {}

    def layer_of(self, path):
        """The src/ folder of a path, "" for a public header, None for anything else."""
        if path.startswith(self.src + os.sep):
            return os.path.relpath(path, self.src).split(os.sep)[0]
        if path.startswith(self.public + os.sep):
            return ""
        return None

    def resolve(self, quote, name, here):
        bases = [os.path.dirname(here)] if quote == '"' else []
        for base in bases + [self.src, self.public]:
            path = os.path.normpath(os.path.join(base, name))
            if os.path.isfile(path) and self.layer_of(path) is not None:
                return path
        return None

    def includes(self, path):
        """[(line, written name, resolved project path or None)] of one file, cached."""
        if path not in self._includes:
            with open(path, encoding="utf-8", errors="replace") as f:
                code = strip_comments(f.read())
            found = []
            for match in INCLUDE.finditer(code):
                line = code.count("\n", 0, match.start()) + 1
                found.append((line, match.group(2), self.resolve(match.group(1), match.group(2), path)))
            self._includes[path] = (found, code)
        return self._includes[path]

    def rel(self, path):
        return os.path.relpath(path, self.root)


def project_breaches(tree, path, layer):
    """Included layers `layer` may not include, reached from `path` through its own layer's headers."""
    breaches = []
    seen = {path}
    stack = [(path, [tree.rel(path)], None)]  # (file, includes that led to it, line in `path`)
    while stack:
        current, chain, first_line = stack.pop()
        for line, name, target in tree.includes(current)[0]:
            if target is None:
                continue
            target_layer = tree.layer_of(target)
            line_in_path = first_line or line
            if target_layer in ("", layer):  # the file's own layer, or a public header: follow it
                if target not in seen:
                    seen.add(target)
                    stack.append((target, chain + [tree.rel(target)], line_in_path))
            elif target_layer not in MAY_INCLUDE[layer]:
                where = " -> ".join(chain + [tree.rel(target)])
                breaches.append(f"{tree.rel(path)}:{line_in_path}: {layer}/ may not include "
                                f"{target_layer}/ ({where})")
    return breaches


def world_breaches(tree, path, layer):
    """Outside headers core may not include, and clock, sleep and world calls of the layer."""
    breaches = []
    found, code = tree.includes(path)
    if layer == "core":
        for line, name, target in found:
            if target is not None or name in CORE_OUTSIDE_HEADERS:
                continue
            standard = "/" not in name and not name.endswith(".h")
            if not standard or name in WORLDLY_STANDARD_HEADERS:
                breaches.append(f"{tree.rel(path)}:{line}: core/ includes <{name}>; core reaches "
                                f"no outside world (the shell passes it in)")
    for pattern in BANNED_CALLS.get(layer, []):
        for match in re.finditer(pattern, code):
            line = code.count("\n", 0, match.start()) + 1
            breaches.append(f"{tree.rel(path)}:{line}: {layer}/ uses {match.group(0).strip()}; "
                            f"time, sleeping and the world come in from the shell")
    return breaches


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    tree = Tree(root)
    if not os.path.isdir(tree.src):
        print(f"check-layers: no src/ under {root}")
        return 2
    breaches = []
    checked = 0
    for folder in sorted(os.listdir(tree.src)):
        if os.path.isdir(os.path.join(tree.src, folder)) and folder not in MAY_INCLUDE:
            breaches.append(f"src/{folder}/: a folder with no layering rule (add it to "
                            f"scripts/check-layers.py and docs/architecture.md)")
    for dirpath, dirnames, files in os.walk(tree.src):
        dirnames.sort()
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            layer = tree.layer_of(path)
            if not name.endswith(SOURCE_SUFFIXES) or layer not in MAY_INCLUDE:
                continue
            checked += 1
            breaches += project_breaches(tree, path, layer)
            breaches += world_breaches(tree, path, layer)
    for breach in breaches:
        print(breach)
    print(f"check-layers: {checked} files, {len(breaches)} breach(es)")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
