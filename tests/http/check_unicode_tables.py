#!/usr/bin/env python3
"""The two code point tables of src/http/path_reading.cc checked against Unicode's own data (Python's
unicodedata): kLookalikes must hold every character whose NFKC form or case mapping holds a path
delimiter ('/', '\\', '.', ';', ':', '?', '#', '%'), and kLookalikes with kMayReadAsAscii every
character whose NFKC form or case mapping holds any ASCII, that NFKC removes, or that is a format
character or a space. A character missed there would read as itself to the gateway and as ASCII to
an upstream (T21)."""

import os
import re
import sys
import unicodedata
import unittest

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "http", "path_reading.cc")
DELIMITERS = set("/\\.;:?#%")


def table(name):
    with open(SOURCE, encoding="utf-8") as f:
        text = f.read()
    body = re.search(r"\b%s = \{\{(.*?)\}\};" % name, text, re.S)
    if not body:
        raise AssertionError("no table %s in %s" % (name, SOURCE))
    ranges = [(int(a, 16), int(b, 16)) for a, b in re.findall(r"\{0x([0-9A-F]+), 0x([0-9A-F]+)\}", body.group(1))]
    return ranges


def forms(c):
    folded = c.casefold()
    return [unicodedata.normalize("NFKC", c), c.lower(), c.upper(), folded, unicodedata.normalize("NFKC", folded)]


class UnicodeTablesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lookalikes = table("kLookalikes")
        cls.may_read = table("kMayReadAsAscii")

    def test_tables_are_sorted_and_disjoint_ranges(self):
        for ranges in (self.lookalikes, self.may_read):
            self.assertGreater(len(ranges), 10)
            for (a, b), (c, _) in zip(ranges, ranges[1:]):
                self.assertLessEqual(a, b)
                self.assertLess(b, c, "ranges out of order at 0x%X" % c)

    def inside(self, ranges, cp):
        return any(a <= cp <= b for a, b in ranges)

    def test_every_character_that_reads_as_a_delimiter_is_a_lookalike(self):
        missed = []
        for cp in range(0x80, 0x110000):
            c = chr(cp)
            if any(DELIMITERS & set(form) for form in forms(c)) and not self.inside(self.lookalikes, cp):
                missed.append("U+%04X %s" % (cp, unicodedata.name(c, "?")))
        self.assertEqual(missed, [])

    def test_every_character_that_may_read_as_ascii_or_nothing_is_listed(self):
        missed = []
        for cp in range(0x80, 0x110000):
            c = chr(cp)
            category = unicodedata.category(c)
            if category in ("Cs", "Co", "Cn"):
                continue
            reads_ascii = any(any(ord(x) < 0x80 for x in form) for form in forms(c))
            vanishes = unicodedata.normalize("NFKC", c) == "" or category in ("Cf", "Zs")
            if (reads_ascii or vanishes) and not (self.inside(self.lookalikes, cp) or self.inside(self.may_read, cp)):
                missed.append("U+%04X %s" % (cp, unicodedata.name(c, "?")))
        self.assertEqual(missed, [])


if __name__ == "__main__":
    print("unicodedata", unicodedata.unidata_version, file=sys.stderr)
    unittest.main(verbosity=2)
