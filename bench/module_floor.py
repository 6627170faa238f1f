"""What one task costs over SSH on a simulated host: the floor under every module call a sweep point makes.

Runs a playbook of no-op tasks (each kind N times) against one simulated host, timed by
bench/callback_plugins/task_times.py, and prints each kind's median and range:

- ``raw`` (the SSH round trip over the shared connection, no Python on the host),
- ``ping`` and ``command`` (an AnsiballZ module: the round trip plus the host's interpreter and the import of
  ``ansible.module_utils.basic`` from the module's zip),
- ``moesweep.sweep.port_owner`` (one of the collection's own modules, read-only),
- ``command`` with ``async`` / ``poll: 0`` (how the sweep starts its benchmark job: the module is copied, not
  piped, and async_wrapper forks it),
- ``set_fact`` and a skipped ``set_fact`` (controller only).

Then, on the host, ``python3 -X importtime`` of a kept AnsiballZ ``ping`` payload: the import of
``ansible.module_utils.basic``, which every module call pays.

Run as root from the repository root: .venv/bin/python bench/module_floor.py [--repeat 8] [--keep-up] [--json].
The first task of each kind is left out (it builds the module's payload on the controller).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from moesweep.runner import run_ansible  # noqa: E402
from moesweep.sim import hosts as simhosts  # noqa: E402

CLUSTER = "bench-floor"
KINDS = {
    "raw": {"ansible.builtin.raw": "true"},
    "ping": {"ansible.builtin.ping": {}},
    "command": {"ansible.builtin.command": "true"},
    "port_owner": {"moesweep.sweep.port_owner": {"port": 30000}},
    "async_start": {"ansible.builtin.command": "sleep 3", "async": 30, "poll": 0},
    "set_fact": {"ansible.builtin.set_fact": {"floor": 1}},
    "skipped": {"ansible.builtin.set_fact": {"floor": 1}, "when": False},
}


def playbook(repeat: int) -> list[dict]:
    tasks = [dict(body, name=f"{kind} {i}") for kind, body in KINDS.items() for i in range(repeat + 1)]
    return [{"name": "Module floor", "hosts": "gpu_hosts", "gather_facts": False, "tasks": tasks}]


def basic_import_s(inventory: Path, work: Path) -> float | None:
    """Seconds the host's python3 takes to import ansible.module_utils.basic from a kept AnsiballZ payload."""
    env = {"ANSIBLE_KEEP_REMOTE_FILES": "1", "ANSIBLE_PIPELINING": "0"}
    proc = run_ansible("ansible", "-i", str(inventory), "gpu_hosts", "-m", "ansible.builtin.ping", "-vvv",
                       check=False, env=env)
    found = [w.strip("'\"") for w in proc.stdout.split() if w.strip("'\"").endswith("/AnsiballZ_ping.py")]
    if not found:
        return None
    script = (f"python3 -X importtime {found[0]} 2>&1 >/dev/null | "
              "awk -F'|' '$3 ~ /^ *ansible.module_utils.basic$/ {print $2}'")
    proc = run_ansible("ansible", "-i", str(inventory), "gpu_hosts", "-m", "ansible.builtin.raw", "-a", script,
                       check=False)
    numbers = [int(w) for w in proc.stdout.split() if w.isdigit()]
    return numbers[-1] / 1e6 if numbers else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=8, help="timed tasks of each kind (after one left out)")
    parser.add_argument("--keep-up", action="store_true", help="leave the simulated host running")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    inventory = Path(f"/run/moesweep/{CLUSTER}.yml")
    work = Path(tempfile.mkdtemp(prefix="moesweep-floor-"))
    simhosts.up(n=1, cluster=CLUSTER, inventory=inventory, log=lambda m: None)
    try:
        book = work / "floor.yml"
        book.write_text(json.dumps(playbook(args.repeat)))
        times = work / "task-times.jsonl"
        env = {"ANSIBLE_CALLBACK_PLUGINS": str(REPO / "bench" / "callback_plugins"),
               "ANSIBLE_CALLBACKS_ENABLED": "task_times", "MOESWEEP_TASK_TIMES": str(times)}
        run_ansible("ansible-playbook", "-i", str(inventory), str(book), env=env)
        rows = [json.loads(line) for line in times.read_text().splitlines() if line.strip()]
        basic = basic_import_s(inventory, work)
    finally:
        if not args.keep_up:
            simhosts.down(cluster=CLUSTER, log=lambda m: None)
    figures = {"repeat": args.repeat, "kinds": {}, "basic_import_s": basic}
    for kind in KINDS:
        secs = [r["seconds"] for r in rows if r["task"].split(" ")[0] == kind and not r["task"].endswith(" 0")]
        figures["kinds"][kind] = {"median_s": round(statistics.median(secs), 3), "min_s": min(secs),
                                  "max_s": max(secs), "n": len(secs)}
    if args.json:
        print(json.dumps(figures))
        return 0
    print(f"one task on a simulated host over SSH, {args.repeat} of each kind (the first left out), "
          f"{os.cpu_count()} CPUs here:")
    for kind, f in figures["kinds"].items():
        print(f"  {kind:12s} median {f['median_s']:.3f} s  (min {f['min_s']:.3f}, max {f['max_s']:.3f})")
    if basic is not None:
        print(f"  on the host, importing ansible.module_utils.basic from the AnsiballZ zip: {basic:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
