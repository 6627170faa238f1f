"""Run the interconnect_facts module's real code path on a real GPU machine and record what it returns.

The module itself (plugins/modules/interconnect_facts.py, called through AnsibleModule exactly as Ansible calls it)
checks the GPUs with nvidia-smi, runs the role's measuring program (roles/sglang_server/files/allreduce_perf.py) with
this machine's torch over NCCL across NGPUS GPUs, parses its nccl-tests table with module_utils/interconnect.py and
returns the measurement. Nothing is installed or changed on the machine.

On this workplace's device (one H100 or H200, `python3` holds torch, no network, no ansible): ansible-core's wheel is
carried in .whl/ (pure Python, e.g. `pip download --no-deps ansible-core==2.19.14 -d .whl`), then

    run(carry=[".whl"], command="python3 bench/device/interconnect_facts.py")

NGPUS (default 1: world size 1, an all-reduce over one GPU - NCCL's local copy, the program's whole path) picks more
GPUs on a machine that has them. The machine's own NCCL_* variables are passed as the "unit environment" so that
they stay set (the device keeps NVLink multicast off with NCCL_NVLS_ENABLE=0). Under $OUT:

  interconnect.json   the module's result (exit_json or fail_json), with the program's table in interconnect.output
  table.txt           that table as printed
  summary.txt         versions, elapsed, the decode-size latencies the estimate would read, the module's verdict

Record them as a fixture with their SOURCES.md (tests/fixtures/interconnect/).
"""

from __future__ import annotations

import glob
import json
import os
import sys
import tempfile
import time
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.environ.get("OUT") or tempfile.mkdtemp(prefix="interconnect-out.")


def ansible_importable():
    try:
        import ansible.module_utils.basic  # noqa: F401
        return True
    except ImportError:
        pass
    wheels = sorted(glob.glob(os.path.join(REPO, ".whl", "ansible_core-*.whl")))
    if not wheels:
        return False
    site = tempfile.mkdtemp(prefix="ansible-core.")
    with zipfile.ZipFile(wheels[-1]) as whl:
        whl.extractall(site)
    sys.path.insert(0, site)
    import ansible.module_utils.basic  # noqa: F401
    return True


def main():
    os.makedirs(OUT, exist_ok=True)
    if not ansible_importable():
        sys.exit("ansible-core is not importable and no .whl/ansible_core-*.whl is carried: "
                 "pip download --no-deps ansible-core==2.19.14 -d .whl, then carry .whl")
    sys.path.insert(0, os.path.join(REPO, "collections"))
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args
    from ansible_collections.moesweep.sweep.plugins.module_utils import interconnect as ic
    from ansible_collections.moesweep.sweep.plugins.modules import interconnect_facts

    ngpus = int(os.environ.get("NGPUS", "1"))
    with open(os.path.join(REPO, "roles", "sglang_server", "files", "allreduce_perf.py")) as fh:
        program = fh.read()
    args = {"ngpus": ngpus, "python": sys.executable, "program_source": program, "timeout": 30,
            "environment": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}}
    result = {}

    def done(self, **kw):
        result.update(kw)
        raise SystemExit(0)

    def failed(self, msg, **kw):
        result.update(kw, failed=True, msg=msg)
        raise SystemExit(1)

    basic.AnsibleModule.exit_json, basic.AnsibleModule.fail_json = done, failed
    started = time.time()
    rc = 0
    with patch_module_args(args):
        try:
            interconnect_facts.main()
        except SystemExit as exc:
            rc = exc.code or 0
    wall = time.time() - started
    with open(os.path.join(OUT, "interconnect.json"), "w") as fh:
        json.dump(result, fh, indent=1, sort_keys=True, default=str)
    m = result.get("interconnect") or {}
    with open(os.path.join(OUT, "table.txt"), "w") as fh:
        fh.write(m.get("output") or result.get("stdout") or "")
    lines = [f"python: {sys.executable} {sys.version.split()[0]}", f"ngpus: {ngpus}",
             f"module rc: {rc}, wall {wall:.2f} s"]
    if result.get("failed"):
        lines.append(f"failed: {result.get('msg')}")
    else:
        rows = m["rows"]
        lines += [f"nccl_version: {m.get('nccl_version')}", f"ranks: {m.get('ranks')}",
                  f"environment: {m.get('environment_text')}", f"program elapsed: {m.get('elapsed')} s",
                  f"rows: {len(rows)} ({rows[0]['size']} .. {rows[-1]['size']} bytes)",
                  f"p2p pairs: {len(m.get('p2p') or [])}"]
        for batch in (1, 8, 64):
            size = ic.decode_message_bytes(6144, batch)
            lines.append(f"GLM-5 decode all-reduce at batch {batch} ({size} B): {ic.latency_us(rows, size):.2f} us")
    with open(os.path.join(OUT, "summary.txt"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"results under {OUT}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
