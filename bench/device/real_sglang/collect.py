#!/usr/bin/env python3
"""Bring a device run's files into the repository (dev machine), redacted, then write the comparison.

    .venv/bin/python bench/device/real_sglang/collect.py FILES_AT [--name real-sglang-h100-x1-20261207]

FILES_AT is the folder the device tool returned ``real-sglang.tar.gz``, ``summary.txt`` and ``driver.log`` in. This
unpacks the archive into ``bench/device/results/<name>/``, redacts GPU UUIDs and serial numbers in every text file
(nothing else: the logs stay verbatim), copies the NCCL world-1 log to ``tests/fixtures/nccl/<device>-<date>/``
(its SOURCES.md line is written by hand), and runs ``compare.py`` on the result.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
UUID = re.compile(r"\b(GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
SERIAL = re.compile(r"(?im)^(\s*Serial Number\s*:\s*)\S+")


def redact(text):
    text = UUID.sub(lambda m: m.group(1) + "-REDACTED", text)
    return SERIAL.sub(lambda m: m.group(1) + "REDACTED", text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files_at")
    ap.add_argument("--name", help="results folder name (default: real-sglang-<gpu>-<yyyymmdd>)")
    args = ap.parse_args()
    with tarfile.open(os.path.join(args.files_at, "real-sglang.tar.gz")) as tf:
        tmp = os.path.join(REPO, ".stack", "collect")
        shutil.rmtree(tmp, ignore_errors=True)
        tf.extractall(tmp)
    src = os.path.join(tmp, "real-sglang")
    run = json.load(open(os.path.join(src, "run.json")))
    gpu = "h200-x1" if "H200" in (run.get("gpu") or "") else "h100-x1"
    date = time.strftime("%Y%m%d", time.gmtime(run["started"]))
    name = args.name or f"real-sglang-{gpu}-{date}"
    dest = os.path.join(REPO, "bench", "device", "results", name)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest)
    for extra in ("driver.log", "summary.txt"):
        if os.path.exists(os.path.join(args.files_at, extra)):
            shutil.copy(os.path.join(args.files_at, extra), dest)
    for folder, _, files in os.walk(dest):
        for f in files:
            path = os.path.join(folder, f)
            try:
                text = open(path, encoding="utf-8").read()
            except (UnicodeDecodeError, OSError):
                continue
            clean = redact(text)
            if clean != text:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(clean)
    nccl = os.path.join(dest, "nccl-world1.log")
    if os.path.exists(nccl):
        fixture = os.path.join(REPO, "tests", "fixtures", "nccl", f"{gpu}-{date}")
        os.makedirs(fixture, exist_ok=True)
        shutil.copy(nccl, os.path.join(fixture, "nccl-world1-allreduce.txt"))
    shutil.rmtree(tmp)
    print(dest)
    subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), dest], check=False)


if __name__ == "__main__":
    main()
