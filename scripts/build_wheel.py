#!/usr/bin/env python3
"""Builds the agentpay wheel from python/agentpay/ and the built libagentpay_client.so.

A wheel is a zip with the package, its .dist-info (METADATA, WHEEL, RECORD) and nothing to build
at install time: `pip install` of it needs no network and no build backend. The tag is
py3-none-linux_<machine>: pure Python over ctypes, with a native library for this platform.

Run:  python3 scripts/build_wheel.py --lib build/src/libagentpay_client.so --version 0.39.0 --out build/python
"""

import argparse
import base64
import hashlib
import os
import platform
import sys
import tomllib
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "python", "agentpay")


def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lib", required=True, help="the built libagentpay_client.so")
    parser.add_argument("--version", required=True)
    parser.add_argument("--out", required=True, help="directory for the .whl")
    args = parser.parse_args()
    with open(os.path.join(ROOT, "python", "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    tag = "py3-none-linux_" + platform.machine()
    name = "agentpay-%s-%s.whl" % (args.version, tag)
    dist_info = "agentpay-%s.dist-info" % args.version
    files = []
    for entry in sorted(os.listdir(PACKAGE)):
        if entry.endswith(".py") or entry == "py.typed":
            with open(os.path.join(PACKAGE, entry), "rb") as f:
                files.append(("agentpay/" + entry, f.read()))
    with open(args.lib, "rb") as f:
        files.append(("agentpay/libagentpay_client.so", f.read()))
    metadata = ["Metadata-Version: 2.1", "Name: agentpay", "Version: " + args.version,
                "Summary: " + project["description"], "Requires-Python: " + project["requires-python"]]
    for extra, requirements in sorted(project.get("optional-dependencies", {}).items()):
        metadata.append("Provides-Extra: " + extra)
        metadata += ['Requires-Dist: %s ; extra == "%s"' % (r, extra) for r in requirements]
    files.append((dist_info + "/METADATA", ("\n".join(metadata) + "\n").encode()))
    files.append((dist_info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: agentpay build_wheel.py\n"
                                         "Root-Is-Purelib: false\nTag: %s\n" % tag).encode()))
    files.append((dist_info + "/top_level.txt", b"agentpay\n"))
    record = "".join("%s,%s,%d\n" % (path, digest(data), len(data)) for path, data in files)
    record += dist_info + "/RECORD,,\n"
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, name)
    with zipfile.ZipFile(path + ".tmp", "w", zipfile.ZIP_DEFLATED) as wheel:
        for file_path, data in files + [(dist_info + "/RECORD", record.encode())]:
            info = zipfile.ZipInfo(file_path, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if file_path.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    os.replace(path + ".tmp", path)
    print(path)


if __name__ == "__main__":
    sys.exit(main())
