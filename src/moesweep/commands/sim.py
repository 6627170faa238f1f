"""``moesweep sim up|down|status``: simulated GPU hosts (real systemd over real SSH, no GPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser(
        "sim",
        help="simulated GPU hosts: boot, stop, list",
        description="Simulated GPU hosts: Debian 12 systemd hosts in network namespaces, with an "
        "SGLang-compatible simulated server and nvidia-smi. A SIMULATION: no GPU is involved.",
    )
    s = p.add_subparsers(dest="sim_command", metavar="ACTION", required=True)
    u = s.add_parser("up", help="boot simulated hosts and write their Ansible inventory")
    u.add_argument("--hosts", type=int, default=1, help="number of hosts (default 1)")
    u.add_argument("--gpu", default="rtx-pro-6000",
                   help="GPU profile: rtx-pro-6000 (SM120), h200 (SM90), h200-x2, b200 (SM100)")
    u.add_argument("--gpu-count", type=int, default=None, help="GPUs per host (default 8; 2 for h200-x2)")
    u.add_argument("--sglang-version", default="0.5.9", help="emulated sglang version: 0.5.9 or 0.5.23")
    u.add_argument(
        "--cuda-toolkits",
        default="12.8,13.1",
        help="simulated toolkits under /usr/local/cuda-X.Y, comma separated; '' for none (default 12.8,13.1)",
    )
    u.add_argument(
        "--knob", action="append", default=[], metavar="NAME=VALUE",
        help="put a host check in its failing state (repeatable): p2p_read=NS, pcie_width_current=8, "
        "power_limit_w=300, persistence_mode=Disabled, shm_size_mb=64, memlock_kb=64, disk_size_mb=64",
    )
    u.add_argument("--driver-version", default=None, help="the simulated driver (default 570.172.08), e.g. 580.159.04")
    u.add_argument("--cluster", default="default", help="name of this set of hosts (default 'default')")
    u.add_argument(
        "--inventory",
        type=Path,
        default=None,
        help="where to write the inventory (default inventory/sim.yml for the default cluster); an existing file "
        "is overwritten only when `sim up` wrote it, and `sim down` removes only such a file",
    )
    u.add_argument("--json", action="store_true", help="print the result as JSON")
    u.set_defaults(func=_up)
    d = s.add_parser("down", help="power off simulated hosts and remove their namespaces")
    d.add_argument("--cluster", default="default", help="name of the set of hosts to power off (default 'default')")
    d.add_argument("--all", action="store_true", help="every cluster, and leftovers of interrupted runs")
    d.set_defaults(func=_down)
    st = s.add_parser("status", help="list simulated hosts")
    st.add_argument("--json", action="store_true",
                    help="print the hosts as JSON (name, address, GPU, sglang, toolkits, state, ssh, cluster)")
    st.set_defaults(func=_status)


def _err(exc: Exception) -> int:
    print(f"moesweep sim: error: {exc}", file=sys.stderr)
    return 2


def _up(args) -> int:
    from moesweep.sim import hosts

    toolkits = [t.strip() for t in args.cuda_toolkits.split(",") if t.strip()]
    try:
        res = hosts.up(
            n=args.hosts,
            gpu=args.gpu,
            gpu_count=args.gpu_count,
            sglang_version=args.sglang_version,
            cuda_toolkits=toolkits,
            cluster=args.cluster,
            inventory=args.inventory,
            driver_version=args.driver_version,
            knobs=args.knob,
            log=lambda m: print(m, file=sys.stderr),
        )
    except hosts.SimError as exc:
        return _err(exc)
    if args.json:
        print(json.dumps({"inventory": str(res.inventory), "reused": res.reused,
                          "seconds": round(res.boot_seconds, 2),
                          "hosts": [{"name": h.name, "address": h.address} for h in res.hosts]}))
    else:
        verb = "already running" if res.reused else f"booted in {res.boot_seconds:.1f} s"
        for h in res.hosts:
            print(f"{h.name}  {h.address}  {h.gpu_count}x {h.gpu_model}  sglang {h.sglang_version}  "
                  f"(SIMULATED)  {verb}")
        print(f"inventory: {res.inventory}")
    return 0


def _down(args) -> int:
    from moesweep.sim import hosts

    try:
        gone = hosts.down(cluster=None if args.all else args.cluster, log=lambda m: print(m, file=sys.stderr))
    except hosts.SimError as exc:
        return _err(exc)
    print(f"stopped: {', '.join(gone) if gone else 'nothing was running'}")
    return 0


def _status(args) -> int:
    from moesweep.sim import hosts

    try:
        rows = hosts.status()
    except hosts.SimError as exc:
        return _err(exc)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no simulated hosts")
        return 0
    for r in rows:
        print(f"{r['name']:<14} {r['address']:<13} {r['gpu']:<16} sglang {r['sglang']:<7} "
              f"cuda {r['toolkits']:<10} {r['state']:<9} ssh={'ok' if r['ssh'] else 'no'}  [{r['cluster']}]")
    return 0
