"""``moesweep facts --from-file FILE [FILE ...] [--json]``: the facts and host checks saved outputs establish.

Reads any saved or pasted nvidia-smi output: the plain table, ``-q``, ``-q -x``, ``--query-gpu`` CSV
with or without header, ``-L``, ``topo -m``, ``topo -p2p r|w|rw|n|a``, or the text nvidia-smi prints when
the driver cannot be used; and what else the host checks read: ``lspci -vvv`` (ACSCap / ACSCtl, LnkCap /
LnkSta), ``/proc/cmdline`` or a ``GRUB_CMDLINE_LINUX`` line (the IOMMU mode), ``/proc/PID/limits``, the
kernel log (Xid lines), ``/proc/meminfo`` and NCCL's INFO lines (the transport NCCL chose between the GPUs).
A shell prompt, the command line and a wrapper's own lines around the output are tolerated. Several files
(in any order) are merged into one set of facts and one run of the host checks, which says which checks
the files could not decide. ``-`` reads stdin.

Exit status: 0 facts were read, 3 the output shows a driver failure, 2 a file cannot be read (the
reason is printed, naming the file).

The reading is ``plugins/module_utils/nvidia_smi.py`` (``read_saved_output`` /
``merge_saved_outputs``) and ``plugins/module_utils/host_checks.py`` (``read_pasted`` /
``evaluate_pasted``), the same parsers and checks ``gpu_facts`` runs on a live host.
"""

from __future__ import annotations

import argparse
import json
import sys

import moesweep._collection  # noqa: F401  (puts the in-repo collection on sys.path)

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import host_checks as hc
from ansible_collections.moesweep.sweep.plugins.module_utils import nvidia_smi as smi

EXIT_OK = 0
EXIT_UNREADABLE = 2
EXIT_DRIVER_FAILURE = 3

RECOGNISED = "the plain table, -q, -q -x, --query-gpu CSV, -L, topo -m, or a driver error message"
RECOGNISED_HOST = (
    "nor topo -p2p, lspci -vvv, /proc/cmdline or a GRUB_CMDLINE_LINUX line, /proc/PID/limits, a kernel log, "
    "/proc/meminfo or NCCL INFO lines"
)

# What the JSON keeps of each GPU (the reading has more: pci_bus_id, memory, power cap ...).
JSON_GPU_KEYS = (
    "index",
    "name",
    "name_truncated",
    "compute_cap",
    "compute_cap_source",
    "sm",
    "pci_bus_id",
    "memory_total_mib",
    "power_limit_w",
    "mig",
)


class UnreadableInput(ValueError):
    """A file that holds no nvidia-smi output this reader knows, with the reason."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "facts",
        help="print the GPU facts a saved nvidia-smi output establishes (table, -q, -q -x, CSV, -L, topo -m)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--from-file",
        dest="files",
        metavar="FILE",
        nargs="+",
        action="extend",
        help="saved nvidia-smi output; several are merged (repeatable; - for stdin)",
    )
    source.add_argument("-i", "--inventory", help="gather the facts of the inventory's gpu_hosts over SSH instead")
    p.add_argument("--limit", help="host pattern (with --inventory)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.set_defaults(func=run)


def read_text(path: str) -> str:
    """The text of a saved output: UTF-8, or UTF-16 with its byte-order mark (what PowerShell's
    ``nvidia-smi > file`` writes). Raises UnreadableInput for a missing, empty or binary file."""
    try:
        if path == "-":
            raw = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as handle:
                raw = handle.read()
    except OSError as exc:
        raise UnreadableInput(f"{path}: cannot open it ({exc.strerror or exc})") from exc
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = raw.decode("utf-16", errors="replace")
    else:
        text = raw.decode("utf-8-sig", errors="replace")
    if not text.strip():
        raise UnreadableInput(f"{path}: the file is empty")
    if "\x00" in text or text.count("\ufffd") > max(8, len(text) // 100):
        raise UnreadableInput(f"{path}: not text (binary data); save nvidia-smi's output as text")
    return text


def load_all(paths: list[str]) -> tuple[dict, list[dict], list[dict]]:
    """Read and merge the files. Returns ``(facts, sources, host_readings)``; raises UnreadableInput naming the
    first file in which neither nvidia-smi output nor any other host-check input is found."""
    readings = []
    hosts = []
    sources = []
    for path in paths:
        text = read_text(path)
        reading = smi.read_saved_output(text)
        host = hc.read_pasted(text)
        if not reading["formats"] and not host["kinds"]:
            raise UnreadableInput(
                f"{path}: no nvidia-smi output found in it (expected {RECOGNISED}; {RECOGNISED_HOST})"
            )
        readings.append(reading)
        hosts.append(host)
        sources.append({"file": path, "formats": reading["formats"] + [k for k in host["kinds"]]})
    return smi.merge_saved_outputs(readings), sources, hosts


def load(paths: list[str]) -> tuple[dict, list[dict]]:
    """Read and merge the files. Returns ``(facts, sources)``; raises UnreadableInput naming the file."""
    facts, sources, _hosts = load_all(paths)
    return facts, sources


def host_checks(facts: dict, hosts: list[dict]) -> tuple[list[dict], list[dict]]:
    """The host checks the files decide (same verdicts, evidence and fixes as gpu_facts on a host) and the ones
    they cannot, each with the input that would decide it."""
    return hc.evaluate_pasted(hosts, facts)


def checks_lines(checks: list[dict], undecided: list[dict]) -> list[str]:
    """The host checks as text: one line per check (its fix under a warning or a failure), then what is not
    decided and the input that would decide it."""
    lines = []
    for check in checks:
        line = f"  {check['verdict']:<4}  {check['name']}: {check['evidence']}"
        if check["verdict"] != "ok" and check.get("fix"):
            line += f"\n        fix: {check['fix']}"
        lines.append(line)
    for item in undecided:
        lines.append(f"  not decided  {item['name']}: needs {item['needs']}")
    return lines


def as_json(facts: dict, sources: list[dict], checks=None) -> dict:
    out = {
        "gpus": [{key: gpu.get(key) for key in JSON_GPU_KEYS} for gpu in facts["gpus"]],
        "gpu_count": facts["gpu_count"],
        "gpu_models": facts["gpu_models"],
        "mixed_models": facts["mixed_models"],
        "compute_cap": facts["compute_cap"],
        "sm": facts["sm"],
        "driver_version": facts["driver_version"],
        "cuda_version": facts["cuda_version"],
        "interconnect": facts["interconnect"],
        "interconnect_detail": facts["interconnect_detail"],
        "interconnect_pairs": facts["interconnect_pairs"],
        "mig": facts["mig"],
        "mig_devices": facts["mig_devices"],
        "virtualization": facts["virtualization"],
        "driver_failure": facts["driver_failure"],
        "sources": sources,
        "warnings": facts["warnings"],
    }
    if checks is not None:
        out["host_checks"], out["host_checks_undecided"] = checks
    return out


def _models_line(facts: dict) -> str:
    if facts["gpu_count"] is None:
        return "GPUs: unknown"
    parts = []
    for model in facts["gpu_models"] or []:
        gpus = [g for g in facts["gpus"] if g["name"] == model]
        cap = gpus[0]["compute_cap"]
        how = {"nvidia-smi": "as printed", "gpu-name": "from the GPU name"}.get(gpus[0]["compute_cap_source"])
        cc = f"compute capability {cap} ({how})" if cap else "compute capability unknown"
        parts.append(f"{len(gpus)} x {model}, {cc}")
    unnamed = sum(1 for g in facts["gpus"] if not g["name"])
    if unnamed:
        parts.append(f"{unnamed} not named in this output")
    return f"GPUs: {facts['gpu_count']} ({'; '.join(parts)})"


def human(facts: dict, sources: list[dict], checks=None) -> str:
    lines = []
    if facts["driver_failure"]:
        lines.append(f"driver failure: {facts['driver_failure']}")
    lines.append(_models_line(facts))
    driver, cuda = facts["driver_version"] or "unknown", facts["cuda_version"] or "unknown"
    lines.append(f"driver: {driver}; highest CUDA it supports: {cuda}")
    inter = facts["interconnect"]
    if inter:
        detail = facts["interconnect_detail"]
        pairs = ", ".join(f"{n} {k}" for k, n in sorted(facts["interconnect_pairs"].items()))
        extra = [detail] if detail != inter else []
        extra += [f"GPU pairs: {pairs}"] if pairs else []
        lines.append(f"interconnect: {inter}" + (f" ({'; '.join(extra)})" if extra else ""))
    else:
        lines.append("interconnect: not shown (add `nvidia-smi topo -m` output)")
    mig = {True: "on", False: "off", None: "unknown"}[facts["mig"]]
    if facts["mig_devices"]:
        mig += f" ({facts['mig_devices']} MIG devices)"
    lines.append(f"MIG: {mig}; GPU virtualization: {facts['virtualization'] or 'unknown'}")
    lines.append("read: " + "; ".join(f"{s['file']} ({', '.join(s['formats'])})" for s in sources))
    lines.extend(f"warning: {w}" for w in facts["warnings"])
    if checks is not None:
        lines.append("host checks (from the files):")
        lines.extend(checks_lines(*checks))
    return "\n".join(lines)


def from_hosts(args) -> int:
    """``moesweep facts -i INVENTORY``: gpu_facts on every host (playbooks/facts.yml, nothing changes)."""
    from moesweep import api

    try:
        found = api.gather_facts(args.inventory, limit=args.limit)
    except api.MoesweepError as exc:
        print(f"moesweep facts: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    if args.json:
        print(json.dumps(found, indent=2, sort_keys=True, default=str))
        return EXIT_OK
    for host, facts in sorted(found.items()):
        if facts.get("failed"):
            print(f"{host}: gpu_facts failed: {facts.get('msg')}")
            continue
        virt = (facts.get("virtualization") or {}).get("kind")
        toolkit = (facts.get("cuda_toolkit") or {}).get("release")
        print(f"{host}: {facts.get('gpu_count')}x {', '.join(facts.get('gpu_models') or [])} ({facts.get('sm')}), "
              f"driver {facts.get('driver_version')}, interconnect {facts.get('interconnect')}, "
              f"virtualization {virt}, CUDA toolkit {toolkit}")
        for check in facts.get("host_checks") or []:
            line = f"  {check['verdict']:<4}  {check['name']}: {check['evidence']}"
            if check["verdict"] != "ok" and check.get("fix"):
                line += f"\n        fix: {check['fix']}"
            print(line)
    return EXIT_OK


def run(args) -> int:
    if getattr(args, "inventory", None):
        return from_hosts(args)
    try:
        facts, sources, hosts = load_all(args.files)
    except UnreadableInput as exc:
        print(f"moesweep facts: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    checks = None if facts["driver_failure"] else host_checks(facts, hosts)
    if args.json:
        print(json.dumps(as_json(facts, sources, checks), indent=2, sort_keys=True))
    else:
        print(human(facts, sources, checks))
    return EXIT_DRIVER_FAILURE if facts["driver_failure"] else EXIT_OK
