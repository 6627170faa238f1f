"""Wall time of a no-change re-run of playbooks/site.yml on 1 and 4 simulated hosts (goal <= 30 s,
flat in host count). Each cluster is converged first (test stack from a wheelhouse served on every
host's gateway, CUDA 12.8 preinstalled), then the timed re-run must report changed=0.

Run as root: .venv/bin/python bench/site_noop.py [--hosts 1 4]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "collections")]

from moesweep.runner import run_ansible  # noqa: E402
from moesweep.sim import hosts as simhosts  # noqa: E402
from moesweep.sim import wheelhouse  # noqa: E402

LOCKS = REPO / "roles" / "sglang_env" / "files" / "locks"
STACK = "test-cpu-sglang-0.5.9"


def changed(stdout: str) -> int:
    return sum(int(n) for n in re.findall(r"changed=(\d+)", stdout))


def bench(n: int, root: Path, show: bool = False) -> tuple[float, float]:
    cluster = f"bench-site{n}"
    inventory = Path(f"/run/moesweep/bench-site{n}.yml")
    res = simhosts.up(n=n, cluster=cluster, inventory=inventory, log=lambda m: None)
    try:
        with contextlib.ExitStack() as stack:
            port = 8701
            for h in res.hosts:
                stack.enter_context(wheelhouse.serve(root, h.gateway, port))
            # Every host reaches the wheelhouse at its own gateway, same port.
            extra = json.dumps({"sglang_env_stack": STACK,
                                "sglang_env_index_url": "http://{{ moesweep_sim_gateway }}:8701/simple/",
                                "sglang_env_trusted_hosts": ["{{ moesweep_sim_gateway }}"]})
            args = ["ansible-playbook", "-i", str(inventory), str(REPO / "playbooks" / "site.yml"), "-e", extra]
            t0 = time.monotonic()
            run_ansible(*args)
            converge = time.monotonic() - t0
            t0 = time.monotonic()
            proc = run_ansible(*args)
            noop = time.monotonic() - t0
            if changed(proc.stdout):
                raise SystemExit(f"re-run on {n} hosts changed something:\n{proc.stdout[-3000:]}")
            if show:
                print(proc.stdout[-4000:], flush=True)
            return converge, noop
    finally:
        simhosts.down(cluster=cluster, log=lambda m: None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--show", action="store_true", help="print the tail of the re-run's output")
    args = parser.parse_args()
    root = wheelhouse.build([LOCKS / f"{STACK}.txt", LOCKS / "client-sglang-0.5.9.txt"])
    for n in args.hosts:
        converge, noop = bench(n, root, args.show)
        print(f"site.yml on {n} simulated host(s): converge {converge:.1f} s, no-change re-run {noop:.1f} s "
              f"(goal <= 30 s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
