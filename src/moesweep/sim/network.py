"""The simulated hosts' network: one namespace per host, a veth to the machine, and routes only between the
hosts of one cluster.

Host I lives at 10.213.I.2 in namespace ``moesweep-hI``; the machine side of its veth ``msw-vhI`` carries
10.213.I.1, where tests serve package indexes (an air-gapped GPU VM reaching its internal mirror). The
namespace has no default route. Hosts of one cluster reach each other (a multi-node server: rank 0 listens
on its dist-init address, the other ranks connect to it) through the machine:

* in host I's namespace, a /32 route to every peer J: ``10.213.J.2 via 10.213.I.1``;
* on the machine, IPv4 forwarding on the cluster's veths only (``net.ipv4.conf.msw-vhI.forwarding=1``;
  ``net.ipv4.ip_forward`` and every other interface are left as they are: the kernel decides forwarding by
  the setting of the interface a packet arrives on, https://docs.kernel.org/networking/ip-sysctl.html
  ``conf/interface/forwarding``);
* policy routing rules (``ip rule``, priority 2130/2131) that let a packet arriving on ``msw-vhI`` be
  forwarded to the cluster's peers and answer anything else with "network unreachable": a host that adds
  routes of its own still reaches no other cluster and nothing beyond the machine;
* where the machine's firewall would drop forwarded packets (an iptables FORWARD chain that is not a bare
  ACCEPT policy, e.g. Docker's ``-P FORWARD DROP``), one ACCEPT rule per ordered pair of the cluster's
  hosts, limited to their two addresses and veths and tagged with a ``moesweep-sim`` comment.

Everything is keyed on the host's veth name, so :func:`teardown` removes it for one host, also after an
interrupted run; the per-interface sysctl goes with the interface.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

from moesweep.sim.model import NETNS_PREFIX, VETH_MACHINE_PREFIX, Host
from moesweep.sim.nspawn import run

RULE_ALLOW_PREF = 2130
RULE_DENY_PREF = 2131
FIREWALL_TAG = "moesweep-sim"
NETNS_DIR = Path("/run/netns")


def netns_exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


def _link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def _forwarding_path(veth: str) -> Path:
    return Path("/proc/sys/net/ipv4/conf", veth, "forwarding")


# ---------------------------------------------------------------- one host


def setup(h: Host) -> None:
    """The host's namespace and veth: it reaches 10.213.I.1 and nothing else (no default route)."""
    teardown(h)
    run(["ip", "netns", "add", h.netns])
    run(["ip", "link", "add", h.veth_host, "type", "veth", "peer", "name", h.veth_cont, "netns", h.netns])
    run(["ip", "addr", "add", f"{h.gateway}/24", "dev", h.veth_host])
    run(["ip", "link", "set", h.veth_host, "up"])
    run(["ip", "-n", h.netns, "link", "set", "lo", "up"])
    run(["ip", "-n", h.netns, "addr", "add", f"{h.address}/24", "dev", h.veth_cont])
    run(["ip", "-n", h.netns, "link", "set", h.veth_cont, "up"])


def teardown(h: Host) -> None:
    """Remove everything of the host's network: its rules, firewall rules, veth and namespace (the routes
    inside the namespace and the veth's sysctl go with them). Idempotent."""
    for rule in _rules_of(h.veth_host):
        run(["ip", "rule", "del", *rule], check=False)
    for spec in _firewall_rules_of(h.veth_host):
        run(["iptables", "-w", "-D", *spec], check=False)
    if _link_exists(h.veth_host):
        run(["ip", "link", "del", h.veth_host], check=False)
    if netns_exists(h.netns):
        run(["ip", "netns", "del", h.netns], check=False)


# ---------------------------------------------------------------- one cluster


def peer_routes(h: Host, cluster: list[Host]) -> list[list[str]]:
    """The routes to add in ``h``'s namespace: one /32 per peer, through the machine side of its own veth."""
    return [["-n", h.netns, "route", "add", f"{p.address}/32", "via", h.gateway, "dev", h.veth_cont]
            for p in cluster if p.index != h.index]


def machine_rules(h: Host, cluster: list[Host]) -> list[list[str]]:
    """The ``ip rule`` selectors for packets arriving from ``h``: its peers are routed, anything else is not."""
    allow = [["pref", str(RULE_ALLOW_PREF), "iif", h.veth_host, "to", f"{p.address}/32", "lookup", "main"]
             for p in cluster if p.index != h.index]
    return [*allow, ["pref", str(RULE_DENY_PREF), "iif", h.veth_host, "unreachable"]]


def firewall_specs(h: Host, cluster: list[Host], cluster_name: str) -> list[list[str]]:
    """iptables FORWARD rules (without -I/-D) that let ``h`` talk to each peer, and nothing else."""
    return [["FORWARD", "-s", f"{h.address}/32", "-d", f"{p.address}/32", "-i", h.veth_host, "-o", p.veth_host,
             "-m", "comment", "--comment", f"{FIREWALL_TAG} {cluster_name}", "-j", "ACCEPT"]
            for p in cluster if p.index != h.index]


def link_cluster(cluster: list[Host], log=print) -> None:
    """Let the cluster's hosts reach each other (and nothing else) through the machine."""
    if len(cluster) < 2:
        return
    name = cluster[0].cluster
    firewall = forward_firewall()
    if firewall == "nft-drop":
        log(f"cluster {name!r}: the machine's nftables forward chain drops packets; its hosts will not reach "
            "each other until it accepts 10.213.0.0/16 between the msw-vh* interfaces")
    for h in cluster:
        for rule in machine_rules(h, cluster):
            run(["ip", "rule", "add", *rule])
        if firewall == "iptables":
            for spec in firewall_specs(h, cluster, name):
                run(["iptables", "-w", "-I", spec[0], "1", *spec[1:]])
        for route in peer_routes(h, cluster):
            run(["ip", *route])
        _forwarding_path(h.veth_host).write_text("1\n")


# ---------------------------------------------------------------- what is installed


def parse_rules(text: str) -> list[dict]:
    """``ip -j rule show`` output."""
    try:
        data = json.loads(text or "[]")
    except ValueError:
        return []
    return [r for r in data if isinstance(r, dict)]


def rule_selector(r: dict) -> list[str] | None:
    """The ``ip rule del`` arguments of one of our rules (priority 2130/2131), from its JSON form."""
    if r.get("priority") not in (RULE_ALLOW_PREF, RULE_DENY_PREF) or not r.get("iif"):
        return None
    sel = ["pref", str(r["priority"]), "iif", r["iif"]]
    if r.get("dst"):
        sel += ["to", f"{r['dst']}/{r.get('dstlen', 32)}"]
    if r.get("action") == "unreachable":
        sel.append("unreachable")
    elif r.get("table"):
        sel += ["lookup", str(r["table"])]
    return sel


def _rules_of(veth: str | None) -> list[list[str]]:
    r = run(["ip", "-j", "rule", "show"], check=False)
    out = []
    for rule in parse_rules(r.stdout):
        sel = rule_selector(rule)
        if sel and rule["iif"].startswith(VETH_MACHINE_PREFIX) and (veth is None or rule["iif"] == veth):
            out.append(sel)
    return out


def parse_forward_chain(text: str) -> tuple[str, list[str]]:
    """``iptables -S FORWARD``: the chain's policy and its rules (each as printed, starting ``-A FORWARD``)."""
    policy, rules = "ACCEPT", []
    for line in text.splitlines():
        parts = line.split()
        if parts[:2] == ["-P", "FORWARD"] and len(parts) > 2:
            policy = parts[2]
        elif parts[:2] == ["-A", "FORWARD"]:
            rules.append(line)
    return policy, rules


def forward_firewall() -> str:
    """What the machine's firewall does to forwarded packets: ``none`` (nothing filters them), ``iptables``
    (an iptables FORWARD chain with a DROP policy or rules of its own: ours go first) or ``nft-drop`` (a
    native nftables forward chain with a drop policy, which moesweep does not edit)."""
    if shutil.which("iptables"):
        r = run(["iptables", "-w", "-S", "FORWARD"], check=False)
        if r.returncode == 0:
            policy, rules = parse_forward_chain(r.stdout)
            if policy != "ACCEPT" or any(FIREWALL_TAG not in line for line in rules):
                return "iptables"
    if shutil.which("nft"):
        r = run(["nft", "list", "chains"], check=False)
        if r.returncode == 0 and "hook forward" in r.stdout and "policy drop" in r.stdout:
            return "nft-drop"
    return "none"


def _firewall_rules_of(veth: str | None) -> list[list[str]]:
    if not shutil.which("iptables"):
        return []
    r = run(["iptables", "-w", "-S", "FORWARD"], check=False)
    if r.returncode != 0:
        return []
    out = []
    for line in parse_forward_chain(r.stdout)[1]:
        if FIREWALL_TAG not in line:
            continue
        args = shlex.split(line)[1:]  # drop -A
        ifaces = {args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-i", "-o")}
        if veth is None and any(i.startswith(VETH_MACHINE_PREFIX) for i in ifaces) or veth in ifaces:
            out.append(args)
    return out


def leftovers() -> dict:
    """Our namespaces, rules and firewall rules present on the machine (any cluster)."""
    names = []
    if NETNS_DIR.is_dir():
        names = sorted(e.name for e in NETNS_DIR.iterdir()
                       if e.name.startswith(NETNS_PREFIX) and e.name[len(NETNS_PREFIX):].isdigit())
    return {"netns": names, "rules": _rules_of(None), "firewall": _firewall_rules_of(None)}


def orphan_indices() -> list[int]:
    found = set()
    for name in leftovers()["netns"]:
        found.add(int(name[len(NETNS_PREFIX):]))
    for sel in _rules_of(None) + _firewall_rules_of(None):
        for a in sel:
            if a.startswith(VETH_MACHINE_PREFIX) and a[len(VETH_MACHINE_PREFIX):].isdigit():
                found.add(int(a[len(VETH_MACHINE_PREFIX):]))
    return sorted(found)


def _is_mountpoint(path: Path) -> bool:
    # os.path.ismount misses a bind mount of a directory onto itself, which is what `ip netns` makes.
    with open("/proc/self/mountinfo") as fh:
        return any(line.split()[4] == str(path) for line in fh)


def release_netns_dir() -> None:
    """Nothing of ours runs: unmount /run/netns when `ip netns` left it mounted and empty."""
    if NETNS_DIR.is_dir() and not any(NETNS_DIR.iterdir()) and _is_mountpoint(NETNS_DIR):
        run(["umount", str(NETNS_DIR)], check=False)

