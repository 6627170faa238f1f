"""The simulated host tooling: boot, reach over SSH with Ansible, tear down without leftovers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, _can_boot_hosts

from moesweep.runner import run_ansible

# alone: it compares the machine's namespaces, links, nspawn processes and routing rules before and after, which
# another worker's hosts would change.
pytestmark = [pytest.mark.hosts, pytest.mark.alone]


def _moesweep(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "moesweep"), *args], cwd=REPO, text=True, capture_output=True
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"moesweep {' '.join(args)}: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def _leftovers(prefix: str = "moesweep-h") -> dict:
    netns = subprocess.run(["ip", "netns", "list"], text=True, capture_output=True).stdout
    links = subprocess.run(["ip", "-o", "link"], text=True, capture_output=True).stdout
    procs = subprocess.run(["pgrep", "-a", "systemd-nspawn"], text=True, capture_output=True).stdout
    rules = subprocess.run(["ip", "rule", "show"], text=True, capture_output=True).stdout
    fwd = subprocess.run(["iptables", "-S", "FORWARD"], text=True, capture_output=True).stdout if shutil.which(
        "iptables") else ""
    return {
        "netns": [line for line in netns.splitlines() if line.startswith(prefix)],
        "veth": [line for line in links.splitlines() if "msw-v" in line],
        "nspawn": [line for line in procs.splitlines() if "moesweep-sim" in line or "-M sim-" in line],
        "rules": [line for line in rules.splitlines() if "msw-v" in line],
        "firewall": [line for line in fwd.splitlines() if "moesweep-sim" in line],
        "forwarding": {p: Path(f"/proc/sys/net/ipv4/{p}").read_text() for p in
                       ("ip_forward", "conf/all/forwarding", "conf/default/forwarding")},
    }


@pytest.fixture(scope="module")
def isolated(tmp_path_factory):
    reason = _can_boot_hosts()
    if reason:
        pytest.skip(reason)
    return tmp_path_factory.mktemp("simhosts")


def test_up_ping_down_repeatedly(isolated):
    inv = isolated / "cycle.yml"
    before = _leftovers()
    for _ in range(2):
        out = json.loads(
            _moesweep("sim", "up", "--hosts", "2", "--cluster", "cycle", "--inventory", str(inv), "--json").stdout
        )
        assert len(out["hosts"]) == 2
        ping = run_ansible("ansible", "-i", str(inv), "gpu_hosts", "-m", "ansible.builtin.ping")
        assert ping.stdout.count("SUCCESS") == 2, ping.stdout
        # idempotent: a second `up` with the same profile reuses the running hosts
        again = json.loads(
            _moesweep("sim", "up", "--hosts", "2", "--cluster", "cycle", "--inventory", str(inv), "--json").stdout
        )
        assert again["reused"] is True
        _moesweep("sim", "down", "--cluster", "cycle")
        assert not inv.exists()
        assert _leftovers() == before
    # down when nothing runs still succeeds (molecule runs destroy first)
    assert "nothing was running" in _moesweep("sim", "down", "--cluster", "cycle").stdout


def test_hosts_are_real_systemd_hosts_without_outside_route(sim_hosts):
    host = sim_hosts.names[0]
    r = sim_hosts.sh(host, "systemctl is-system-running; cat /proc/1/comm; ip route")
    lines = r.stdout.split()
    assert lines[0] == "running" and lines[1] == "systemd"
    assert "default" not in r.stdout  # only 10.213.I.0/24 is reachable
    prof = json.loads(sim_hosts.sh(host, "cat /etc/moesweep-sim/profile.json").stdout)
    assert prof["simulated"] is True and prof["gpu_model"] == "rtx-pro-6000" and prof["gpu_count"] == 8
    # the machine's own port 22 is not bound by any host's sshd
    ss = subprocess.run(["ss", "-Hltn"], text=True, capture_output=True).stdout
    assert not any(line.split()[3].endswith(":22") for line in ss.splitlines() if line.strip())


def test_inventory_marks_hosts_simulated(sim_hosts):
    r = sim_hosts.ansible("gpu_hosts", "-m", "ansible.builtin.debug", "-a", "var=moesweep_simulated")
    assert r.stdout.count('moesweep_simulated: true') == 2, r.stdout


def test_bad_input_is_refused_before_anything_starts(isolated):
    for args, needle in (
        (["--gpu", "a100"], "unknown --gpu 'a100'"),
        (["--hosts", "0"], "--hosts must be between 1 and 16"),
        (["--sglang-version", "0.4.0"], "emulates 0.5.9, 0.5.23"),
        (["--cuda-toolkits", "12"], "bad CUDA toolkit version '12'"),
    ):
        before = _leftovers()
        r = _moesweep("sim", "up", "--cluster", "bad", *args, check=False)
        assert r.returncode == 2 and needle in r.stderr, (args, r.stderr)
        assert _leftovers() == before


# ------------------------------------------------------------------ hosts of one cluster reach each other

PROBE = ("import socket, sys\n"
         "s = socket.socket(); s.settimeout(3)\n"
         "try:\n    s.connect((sys.argv[1], int(sys.argv[2]))); s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
         "    print(s.recv(12).decode())\n"
         "except OSError as e:\n    print(type(e).__name__, e.errno)\n")


def _probe(cluster, host: str, addr: str, port: int) -> str:
    """From inside ``host``: connect to addr:port, send a request, return the status line's start or the errno."""
    from moesweep.sim import hosts

    return hosts.nsenter(host, "python3", "-c", PROBE, addr, str(port), timeout=20).stdout.strip()


@pytest.fixture(scope="module")
def pair_and_stranger(sim_clusters):
    """Two hosts of one cluster and two of another (forwarding is on for both clusters' links)."""
    return sim_clusters("mnode", hosts=2), sim_clusters("mnode-x", hosts=2)


def test_hosts_of_one_cluster_exchange_tcp_and_no_other_cluster_can(pair_and_stranger):
    pair, stranger = pair_and_stranger
    a, b = pair.hosts
    x = stranger.hosts[0]
    serve = f"setsid python3 -m http.server -b {b.address} 8931 >/dev/null 2>&1 </dev/null & echo $!"
    pid = pair.sh(b.name, serve, check=True).stdout.strip()
    try:
        deadline = time.monotonic() + 20
        while _probe(pair, b.name, b.address, 8931) != "HTTP/1.0 200" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _probe(pair, a.name, b.address, 8931) == "HTTP/1.0 200"  # a -> b through the machine
        # the other cluster's host has no route to b ...
        assert _probe(stranger, x.name, b.address, 8931) == "OSError 101"  # ENETUNREACH
        # ... and adding one of its own does not get it through: the machine answers "network unreachable"
        # (its rule for packets from that host's link; without it the SYN would be forwarded and time out)
        stranger.sh(x.name, f"ip route add {b.address}/32 via {x.gateway}", check=True)
        assert _probe(stranger, x.name, b.address, 8931) == "OSError 101"
        # nor does a host of the pair reach the stranger, nor anything beyond the machine, by adding a route
        pair.sh(a.name, f"ip route add {x.address}/32 via {a.gateway}", check=True)
        assert _probe(pair, a.name, x.address, 22) == "OSError 101"
        pair.sh(a.name, f"ip route add 198.51.100.0/24 via {a.gateway}", check=True)
        assert _probe(pair, a.name, "198.51.100.7", 53) == "OSError 101"
    finally:
        pair.sh(b.name, f"kill {pid}")
        pair.sh(a.name, f"ip route del {x.address}/32 via {a.gateway}; ip route del 198.51.100.0/24 via {a.gateway}")
        stranger.sh(x.name, f"ip route del {b.address}/32 via {x.gateway}")
    # still air-gapped: no default route, nothing but the gateway and the peer
    routes = pair.sh(a.name, "ip -4 route show").stdout
    assert "default" not in routes and f"{b.address} via {a.gateway}" in routes
    assert pair.sh(a.name, "ip route get 151.101.0.223").returncode != 0


def test_a_multi_node_server_spreads_over_two_hosts(pair_and_stranger):
    """Rank 0 on one host listens on its dist-init address; rank 1 on the other connects to it."""
    pair, _ = pair_and_stranger
    a, b = pair.hosts
    args = ("MOESWEEP_SIM_TIME_SCALE=0.1 setsid /opt/moesweep-sim/bin/sglang-sim --model-path lukealonso/GLM-5-NVFP4 "
            "--tp 8 --quantization modelopt_fp4 --moe-runner-backend flashinfer_cutlass --nnodes 2 "
            f"--dist-init-addr {a.address}:5757 --port 30000")
    pids = {}
    for rank, h in enumerate((a, b)):
        pids[h.name] = pair.sh(h.name, f"{args} --node-rank {rank} --host {h.address} "
                                       f">/tmp/node{rank}.log 2>&1 </dev/null & echo $!", check=True).stdout.strip()
    try:
        deadline = time.monotonic() + 90
        ready = ""
        while time.monotonic() < deadline:
            ready = _probe(pair, b.name, a.address, 30000)
            logs = pair.sh(b.name, "cat /tmp/node1.log").stdout
            if ready and "Dummy health check server started" in logs and "200" in _health(a.address):
                break
            time.sleep(0.5)
        log0 = pair.sh(a.name, "cat /tmp/node0.log").stdout
        log1 = pair.sh(b.name, "cat /tmp/node1.log").stdout
        assert _health(a.address) == "200", log0[-2000:]
        assert f"Dummy health check server started in background thread at {b.address}:30000" in log1, log1[-2000:]
        assert "TP0] Init torch distributed begin." in log0 and "TP4] Init torch distributed begin." in log1
    finally:
        for h in (a, b):
            pair.sh(h.name, f"kill {pids[h.name]}; sleep 1; kill -9 {pids[h.name]} 2>/dev/null; true")


def _health(addr: str) -> str:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{addr}:30000/health", timeout=5) as r:
            return str(r.status)
    except OSError as exc:
        return repr(exc)


# ------------------------------------------------------------------ what moesweep may write and remove

USER_INVENTORY = "---\nall:\n  hosts:\n    my-gpu-vm:\n      ansible_host: 192.0.2.10\n"


def test_a_users_inventory_is_never_overwritten_nor_removed(isolated):
    mine = isolated / "mine.yml"
    mine.write_text(USER_INVENTORY)
    before = _leftovers()
    r = _moesweep("sim", "up", "--cluster", "inv", "--inventory", str(mine), check=False)
    assert r.returncode == 2 and f"refusing to overwrite {mine}" in r.stderr, r.stderr
    assert mine.read_text() == USER_INVENTORY and _leftovers() == before
    ours = isolated / "ours.yml"
    _moesweep("sim", "up", "--cluster", "inv", "--inventory", str(ours))
    assert ours.read_text().startswith("---\n# Written by `moesweep sim up`")
    ours.write_text(USER_INVENTORY)  # the user made it their own
    down = _moesweep("sim", "down", "--cluster", "inv")
    assert ours.read_text() == USER_INVENTORY and f"left {ours} in place" in down.stderr
    assert _leftovers() == before


SCRATCH = r"""
set -e
mount --make-rprivate /
mkdir -p /run/netns && mount -t tmpfs moesweep-test /run/netns
ip link set lo up
iptables -w -P FORWARD DROP
up() { "$MOESWEEP" sim up --cluster "$1" --hosts "$2" --inventory "$STATE/$1.yml" --json; }
up fw-pair 2 > "$STATE/pair.json"
up fw-other 1 > "$STATE/other.json"
echo "== after up"; iptables -w -S FORWARD
"$PYTHON" - <<'PY'
import json, os, time
from moesweep.sim import hosts
st = os.environ["STATE"]
a, b = json.load(open(f"{st}/pair.json"))["hosts"]
(x,) = json.load(open(f"{st}/other.json"))["hosts"]
serve = f"setsid python3 -m http.server -b {b['address']} 8931 >/dev/null 2>&1 </dev/null &"
hosts.nsenter(b["name"], "sh", "-c", serve)
get = ("import sys, urllib.request\ntry: print(urllib.request.urlopen(sys.argv[1], timeout=3).status)\n"
       "except OSError as e: print('failed', e)")
url = f"http://{b['address']}:8931/"
for _ in range(50):
    r = hosts.nsenter(a["name"], "python3", "-c", get, url).stdout.strip()
    if r == "200":
        break
    time.sleep(0.2)
print("pair:", r)
gw = x["address"].rsplit(".", 1)[0] + ".1"
hosts.nsenter(x["name"], "ip", "route", "add", f"{b['address']}/32", "via", gw)
print("other:", hosts.nsenter(x["name"], "python3", "-c", get, url).stdout.strip()[:6])
PY
"$MOESWEEP" sim down --cluster fw-pair
"$MOESWEEP" sim down --cluster fw-other
echo "== after down"; iptables -w -S FORWARD; ip rule show | grep -c msw-vh || true
"""


@pytest.mark.skipif(not (shutil.which("iptables") and shutil.which("unshare")), reason="needs iptables and unshare")
def test_a_cluster_talks_through_a_firewall_that_drops_forwarding(isolated):
    """In a scratch network namespace (the machine's own firewall is never touched) with iptables' FORWARD
    policy DROP, as Docker sets it: the pair still talks, the other cluster does not, and down removes every
    rule it added."""
    state_dir = isolated / "scratch-state"
    env = {**os.environ, "MOESWEEP_SIM_STATE_DIR": str(state_dir), "STATE": str(isolated),
           "MOESWEEP": str(Path(sys.executable).parent / "moesweep"), "PYTHON": sys.executable}
    r = subprocess.run(["unshare", "--net", "--mount", "sh", "-c", SCRATCH], env=env, text=True, capture_output=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    up, down = r.stdout.split("== after up")[1].split("== after down")
    assert up.count("--comment \"moesweep-sim fw-pair\" -j ACCEPT") == 2, up
    assert "moesweep-sim fw-other" not in up  # a one-host cluster forwards nothing
    assert "pair: 200" in r.stdout and "other: failed" in r.stdout, r.stdout
    assert down.split() == ["-P", "FORWARD", "DROP", "0"], down
