#!/usr/bin/env python3
"""docs/threat-model.md names, for every threat, the tests that show its mitigation. This checks that
each threat has a **Tests.** paragraph and that every test it names exists: GoogleTest names
(`Suite.Test`, `Suite.*`) in tests/**/*.cc, ctest names (`security.x`, `integration.x`, `fuzz.x`, ...)
in tests/CMakeLists.txt, and Python test methods (`test_...`) in tests/**/*.py."""

import glob
import os
import re
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOC = os.path.join(ROOT, "docs", "threat-model.md")
CTEST_PREFIXES = ("security.", "integration.", "fuzz.", "fault.", "docs.", "browser.", "chain_env.")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class ThreatModelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.doc = read(DOC)
        cls.cc = "\n".join(read(p) for p in glob.glob(os.path.join(ROOT, "tests", "**", "*.cc"), recursive=True))
        cls.py = "\n".join(read(p) for p in glob.glob(os.path.join(ROOT, "tests", "**", "*.py"), recursive=True))
        cls.cmake = read(os.path.join(ROOT, "tests", "CMakeLists.txt"))
        cls.gtests = set(re.findall(r"^TEST(?:_F|_P)?\((\w+),\s*(\w+)\)", cls.cc, re.M))
        cls.suites = {suite for suite, _ in cls.gtests}
        cls.ctests = set(re.findall(r"add_test\(NAME\s+([\w.${}]+)", cls.cmake))
        cls.ctests |= set(re.findall(r"^agentpay_anvil_test\(([\w.]+)\s", cls.cmake, re.M))

    def test_every_threat_names_its_tests(self):
        sections = re.split(r"^### ", self.doc, flags=re.M)[1:]
        self.assertGreaterEqual(len(sections), 15)
        for section in sections:
            title = section.splitlines()[0]
            if title.startswith("T17"):
                continue  # a root-only script, reviewed by hand (said in the section)
            self.assertIn("**Tests.**", section, "threat %r names no test" % title)

    def test_every_named_test_exists(self):
        names = re.findall(r"`([^`\s]+)`", self.doc)
        checked = 0
        for name in names:
            if name.startswith(CTEST_PREFIXES):
                base = name.rstrip("*").rstrip(".")
                found = base in self.ctests or any(
                    re.match(re.escape(t).replace(r"\$\{name\}", r"\w+").replace(r"\$\{target\}", r"\w+") + "$", base)
                    and self._loop_has(base) for t in self.ctests)
                self.assertTrue(found, "ctest %r named in threat-model.md does not exist" % name)
                checked += 1
            elif re.fullmatch(r"[A-Z]\w+\.(\w+|\*)", name):
                suite, test = name.split(".")
                if test == "*":
                    self.assertTrue(suite in self.suites, "GoogleTest suite %r does not exist" % suite)
                else:
                    self.assertTrue((suite, test) in self.gtests, "GoogleTest %r does not exist" % name)
                checked += 1
            elif re.fullmatch(r"test_\w+", name):
                self.assertRegex(self.py, r"def %s\(" % name, "Python test %r does not exist" % name)
                checked += 1
        self.assertGreater(checked, 60, "the threat model names hardly any test")

    def _loop_has(self, name):
        """security.x registered through a foreach(name a b c) loop."""
        prefix, _, leaf = name.partition(".")
        for loop in re.findall(r"foreach\((?:name|target)\s+([^)]*)\)", self.cmake):
            if leaf in loop.split() or leaf.replace("_short", "") in loop.split():
                return True
        return False


if __name__ == "__main__":
    unittest.main(verbosity=2)
