"""``moesweep sim``: what it refuses and what it never deletes, without booting a host.

Every case runs the real command in a subprocess against a private state directory
(MOESWEEP_SIM_STATE_DIR under tmp_path) and a PATH without systemd-nspawn, so even a missing check
could not boot a host; and inside a guard that refuses (exit 97) any deletion outside tmp_path, so a
regression fails the test instead of deleting the machine's files (``sim down --cluster /`` once meant
``shutil.rmtree("/")``)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
USER_INVENTORY = "---\nall:\n  hosts:\n    my-gpu-vm:\n      ansible_host: 192.0.2.10\n"


@pytest.fixture
def state(tmp_path):
    """A state directory three levels down, with something to lose at every level above it."""
    root = tmp_path / "machine"
    state_dir = root / "run" / "moesweep" / "sim"
    state_dir.mkdir(parents=True)
    for level in (root, root / "run", root / "run" / "moesweep"):
        (level / "keep.txt").write_text("not moesweep's\n")
    return state_dir


GUARD = """
import os, shutil, sys
ROOT = os.path.realpath(os.environ["MOESWEEP_TEST_ROOT"])
def _check(path, dir_fd=None):
    path = os.fsdecode(path)
    if dir_fd is not None and not os.path.isabs(path):
        path = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
    real = os.path.realpath(path)
    if real != ROOT and not real.startswith(ROOT + os.sep):
        print(f"TEST GUARD: refused to delete {path!r} ({real}, outside {ROOT})", file=sys.stderr)
        os._exit(97)
def guard(fn):
    def wrapped(path, *a, **k):
        _check(path, k.get("dir_fd"))
        return fn(path, *a, **k)
    return wrapped
_rmtree = shutil.rmtree
shutil.rmtree = guard(_rmtree)
for name in ("unlink", "remove", "rmdir", "removedirs"):
    setattr(os, name, guard(getattr(os, name)))
from moesweep.cli import main
sys.exit(main(["sim", *sys.argv[1:]]))
"""


def sim(state_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOESWEEP_")}
    env.update(MOESWEEP_SIM_STATE_DIR=str(state_dir), PATH=str(BIN),
               MOESWEEP_TEST_ROOT=str(state_dir.parents[3]))
    r = subprocess.run([sys.executable, "-c", GUARD, *args], env=env, text=True, capture_output=True, timeout=60)
    assert r.returncode != 97, r.stderr
    return r


def survivors(state_dir: Path) -> list[str]:
    root = state_dir.parents[2]
    return sorted(str(p.relative_to(root)) for p in root.rglob("keep.txt"))


ALL_KEEPS = ["keep.txt", "run/keep.txt", "run/moesweep/keep.txt"]


@pytest.mark.parametrize("name", ["../..", "..", ".", "a/../..", "/", "x/y", "", "é", "x" * 21, "a b"])
def test_down_refuses_a_bad_cluster_name_and_deletes_nothing(state, name):
    r = sim(state, "down", "--cluster", name)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"bad cluster name {name!r}" in r.stderr and "letters, digits, - and _" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert survivors(state) == ALL_KEEPS
    assert state.is_dir()


def test_up_refuses_a_bad_cluster_name_the_same_way(state):
    r = sim(state, "up", "--cluster", "../..")
    assert r.returncode == 2 and "bad cluster name '../..'" in r.stderr, r.stderr
    assert survivors(state) == ALL_KEEPS


def test_up_refuses_to_overwrite_an_inventory_moesweep_did_not_write(state, tmp_path):
    mine = tmp_path / "inventory" / "mine.yml"
    mine.parent.mkdir()
    mine.write_text(USER_INVENTORY)
    r = sim(state, "up", "--cluster", "t1", "--inventory", str(mine))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert str(mine) in r.stderr and "was not written by `moesweep sim up`" in r.stderr, r.stderr
    assert "--inventory" in r.stderr  # the fix: another path
    assert "Traceback" not in r.stderr
    assert mine.read_text() == USER_INVENTORY
    assert not (state / "hosts.json").exists() and not (state / "clusters").exists()


def test_up_refuses_an_inventory_path_that_is_a_directory(state, tmp_path):
    r = sim(state, "up", "--cluster", "t1", "--inventory", str(tmp_path))
    assert r.returncode == 2 and str(tmp_path) in r.stderr and "directory" in r.stderr, r.stderr


def _legacy_cluster(state: Path, cluster: str, inventory: Path) -> None:
    """The record an older `sim up` left: the inventory's path in clusters/<name>/inventory-path."""
    (state / "clusters" / cluster).mkdir(parents=True)
    (state / "clusters" / cluster / "inventory-path").write_text(f"{inventory}\n")


def test_down_keeps_a_recorded_inventory_that_is_no_longer_moesweeps(state, tmp_path):
    mine = tmp_path / "mine.yml"
    mine.write_text(USER_INVENTORY)
    _legacy_cluster(state, "t2", mine)
    r = sim(state, "down", "--cluster", "t2")
    assert r.returncode == 0, r.stderr
    assert mine.read_text() == USER_INVENTORY
    assert f"left {mine} in place" in r.stderr, r.stderr
    assert not (state / "clusters" / "t2").exists()


def test_down_removes_the_inventory_it_wrote(state, tmp_path):
    from moesweep.sim import inventory as siminv

    inv = tmp_path / "sim.yml"
    inv.write_text(siminv.render_inventory([], Path("/k"), cluster="t3"))
    _legacy_cluster(state, "t3", inv)
    assert sim(state, "down", "--cluster", "t3").returncode == 0
    assert not inv.exists()


def test_down_keeps_an_inventory_another_cluster_wrote(state, tmp_path):
    from moesweep.sim import inventory as siminv

    inv = tmp_path / "sim.yml"
    text = siminv.render_inventory([], Path("/k"), cluster="other")
    inv.write_text(text)
    _legacy_cluster(state, "t4", inv)
    r = sim(state, "down", "--cluster", "t4")
    assert r.returncode == 0, r.stderr
    assert inv.read_text() == text


def test_down_never_follows_a_state_entry_out_of_the_state_directory(state, tmp_path):
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "data").write_text("precious\n")
    # A cluster's directories replaced by links out of the state directory...
    (state / "clusters").mkdir()
    (state / "clusters" / "t5").symlink_to(outside)
    (state / "payload").mkdir()
    (state / "payload" / "t5").symlink_to(outside / "sub")
    # ...and a host record whose name climbs out of it.
    host = {"name": "../../../..", "index": 250, "cluster": "t5", "gpu_model": "h200", "gpu_count": 8,
            "sglang_version": "0.5.9", "cuda_toolkits": [], "driver_version": "570.172.08",
            "nspawn_pid": 0, "leader_pid": 0, "extra": {}}
    (state / "hosts.json").write_text(json.dumps({"hosts": [host]}))
    r = sim(state, "down", "--cluster", "t5")
    assert "Traceback" not in r.stderr, r.stderr
    assert (outside / "sub" / "data").read_text() == "precious\n"
    assert survivors(state) == ALL_KEEPS


def test_status_lists_nothing_in_an_empty_state_directory(state):
    r = sim(state, "status", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == []


# ------------------------------------------------------------------ inventory ownership (pure)



@pytest.fixture
def siminv():
    from moesweep.sim import inventory

    return inventory


def test_an_inventory_written_by_moesweep_is_recognised_with_its_cluster(siminv):
    text = siminv.render_inventory([], Path("/k"), cluster="c1")
    assert siminv.written_by_moesweep(text) and siminv.written_for(text) == "c1"
    assert text.startswith("---\n# Written by `moesweep sim up`: SIMULATED GPU hosts")


def test_an_inventory_from_an_older_sim_up_is_moesweeps_without_a_cluster(siminv):
    legacy = ("---\n# Written by `moesweep sim up`: SIMULATED GPU hosts (systemd-nspawn, no GPU).\n"
              "# Regenerated on every `sim up`; `moesweep sim down` removes it.\nall: {}\n")
    assert siminv.written_by_moesweep(legacy) and siminv.written_for(legacy) is None


@pytest.mark.parametrize("text", [USER_INVENTORY, "", "# Written by `moesweep sim up`\n",
                                  "---\n# my notes\n# Written by `moesweep sim up`: SIMULATED GPU hosts\n"])
def test_anything_else_is_not_moesweeps(siminv, text):
    assert not siminv.written_by_moesweep(text)


# ------------------------------------------------------------------ the cluster's network (pure)

# Recorded with iproute2 6.1.0 (Debian 12) in a scratch network namespace holding the rules `sim up` adds for
# a two-host cluster (msw-vh2 deleted since: "iif_detached"), plus one rule that is not ours.
IP_RULE_JSON = (
    '[{"priority":0,"src":"all","table":"local"},{"priority":2130,"src":"all","dst":"10.213.2.2","iif":"msw-vh1",'
    '"table":"main"},{"priority":2130,"src":"all","dst":"10.213.1.2","iif":"msw-vh2","iif_detached":null,'
    '"table":"main"},{"priority":2131,"src":"all","iif":"msw-vh1","action":"unreachable"},{"priority":2131,'
    '"src":"all","iif":"msw-vh2","iif_detached":null,"action":"unreachable"},{"priority":5000,"src":"all",'
    '"dst":"10.9.0.0","dstlen":16,"iif":"eth0","iif_detached":null,"table":"100"},{"priority":32766,"src":"all",'
    '"table":"main"},{"priority":32767,"src":"all","table":"default"}]'
)
# Recorded with iptables v1.8.9 (nf_tables), Debian 12, in a scratch network namespace: a DROP policy as Docker
# sets it, one rule `sim up` inserts, one that is not ours.
IPTABLES_S_FORWARD = (
    "-P FORWARD DROP\n"
    '-A FORWARD -s 10.213.1.2/32 -d 10.213.2.2/32 -i msw-vh1 -o msw-vh2 -m comment --comment "moesweep-sim mnode" '
    "-j ACCEPT\n"
    "-A FORWARD -i docker0 -o docker0 -j ACCEPT\n"
)


@pytest.fixture
def net():
    from moesweep.sim import network

    return network


def _hosts(*indices, cluster="mnode"):
    from moesweep.sim.model import Host

    return [Host(f"sim-{cluster}-{n}", i, cluster, "h200", 8, "0.5.9", [], "570.172.08")
            for n, i in enumerate(indices, 1)]


def test_each_host_gets_a_32_route_to_each_peer_through_its_own_gateway_only(net):
    a, b, c = _hosts(4, 9, 17)
    assert net.peer_routes(a, [a, b, c]) == [
        ["-n", "moesweep-h4", "route", "add", "10.213.9.2/32", "via", "10.213.4.1", "dev", "msw-vc4"],
        ["-n", "moesweep-h4", "route", "add", "10.213.17.2/32", "via", "10.213.4.1", "dev", "msw-vc4"],
    ]
    assert not any("default" in r for h in (a, b, c) for r in net.peer_routes(h, [a, b, c]))
    assert net.peer_routes(a, [a]) == []


def test_the_machine_routes_a_hosts_packets_to_its_peers_and_refuses_the_rest(net):
    a, b = _hosts(4, 9)
    assert net.machine_rules(a, [a, b]) == [
        ["pref", "2130", "iif", "msw-vh4", "to", "10.213.9.2/32", "lookup", "main"],
        ["pref", "2131", "iif", "msw-vh4", "unreachable"],
    ]


def test_firewall_rules_name_both_addresses_both_links_and_the_cluster(net):
    a, b = _hosts(1, 2)
    (spec,) = net.firewall_specs(a, [a, b], "mnode")
    printed = next(line for line in IPTABLES_S_FORWARD.splitlines() if "moesweep-sim" in line)
    # what `iptables -S` prints for the rule is the rule we insert
    assert ["-A", *spec] == shlex.split(printed)


def test_our_rules_are_found_in_ip_rule_output_and_others_are_not(net):
    sels = [net.rule_selector(r) for r in net.parse_rules(IP_RULE_JSON)]
    assert [s for s in sels if s] == [
        ["pref", "2130", "iif", "msw-vh1", "to", "10.213.2.2/32", "lookup", "main"],
        ["pref", "2130", "iif", "msw-vh2", "to", "10.213.1.2/32", "lookup", "main"],
        ["pref", "2131", "iif", "msw-vh1", "unreachable"],
        ["pref", "2131", "iif", "msw-vh2", "unreachable"],
    ]
    assert net.parse_rules("") == [] and net.parse_rules("not json") == []


def test_the_forward_chain_policy_and_rules_are_read(net):
    policy, rules = net.parse_forward_chain(IPTABLES_S_FORWARD)
    assert policy == "DROP" and len(rules) == 2 and rules[1] == "-A FORWARD -i docker0 -o docker0 -j ACCEPT"
    assert net.parse_forward_chain("-P FORWARD ACCEPT\n") == ("ACCEPT", [])


def test_firewall_rules_of_one_link_are_found_for_removal(net, monkeypatch):
    import subprocess as sp

    monkeypatch.setattr(net.shutil, "which", lambda tool: f"/usr/sbin/{tool}")
    monkeypatch.setattr(net, "run", lambda cmd, check=True: sp.CompletedProcess(cmd, 0, IPTABLES_S_FORWARD, ""))
    expected = ["FORWARD", "-s", "10.213.1.2/32", "-d", "10.213.2.2/32", "-i", "msw-vh1", "-o", "msw-vh2",
                "-m", "comment", "--comment", "moesweep-sim mnode", "-j", "ACCEPT"]
    assert net._firewall_rules_of("msw-vh2") == [expected] == net._firewall_rules_of(None)
    assert net._firewall_rules_of("msw-vh3") == []
    assert net.forward_firewall() == "iptables"


def test_knobs_are_checked_before_anything_boots():
    from moesweep.sim import model

    assert model.parse_knobs(["p2p_read=NS", "shm_size_mb=64", "power_limit_w=300"]) == {
        "p2p_read": "NS", "shm_size_mb": 64, "power_limit_w": 300.0}
    for bad, needle in (("nope=1", "unknown --knob 'nope'"), ("p2p_read=XX", "choose one of OK, NS"),
                        ("memlock_kb=lots", "expected a int"), ("disk_size_mb=0", "must be > 0")):
        with pytest.raises(model.SimError, match=needle):
            model.parse_knobs([bad])


def test_knobs_reach_the_profile_and_the_memlock_one_the_container():
    from moesweep.sim import model, nspawn

    h = model.Host(name="sim-gpu-1", index=1, cluster="default", gpu_model="rtx-pro-6000", gpu_count=2,
                   sglang_version="0.5.9", cuda_toolkits=[], driver_version="570.172.08",
                   extra={"knobs": {"p2p_read": "NS", "memlock_kb": 64}})
    assert h.profile()["p2p_read"] == "NS" and h.profile()["gpu_count"] == 2
    assert nspawn.memlock_args(h.extra["knobs"]) == ["--rlimit=RLIMIT_MEMLOCK=65536",
                                                     "--drop-capability=CAP_SYS_RESOURCE"]
    assert nspawn.memlock_args({}) == []


def test_the_inventory_stages_the_model_from_the_hub_sim_up_serves(tmp_path):
    from moesweep.sim import inventory

    served, bare = _hosts(3, 4, cluster="default")
    served.extra = {"hub_url": "http://10.213.3.1:8703"}
    data = inventory.inventory_data([served, bare], tmp_path / "key")["all"]["children"]["gpu_hosts"]["hosts"]
    assert data[served.name]["model_hub_endpoint"] == "http://10.213.3.1:8703"
    assert data[served.name]["model_stage_python"] == "/opt/moesweep/venvs/client/bin/python"
    assert data[served.name]["model_stage_reserve_bytes"] == 256 << 20
    assert "model_hub_endpoint" not in data[bare.name]


def test_the_hub_serves_a_stand_in_of_the_default_model_with_a_stable_revision(tmp_path, monkeypatch):
    import json
    import socket
    import urllib.request

    from moesweep.sim import hub, state

    monkeypatch.setattr(state, "STATE_DIR", tmp_path)
    repo_id = hub.default_repo_id()
    assert repo_id == "lukealonso/GLM-5-NVFP4"  # the sglang_server role's default model-path
    hub.write_repo()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pid = hub.start_server("127.0.0.1", tmp_path / "hub.log", port)
    try:
        assert pid > 0 and hub.answers("127.0.0.1", port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/models/{repo_id}") as r:
            first = json.load(r)
        hub.write_repo()  # a later `sim up` writes the same bytes: the same revision, nothing to stage again
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/models/{repo_id}") as r:
            again = json.load(r)
        assert first["sha"] == again["sha"] and len(first["sha"]) == 40
        names = {f["rfilename"]: f for f in first["siblings"]}
        assert json.loads((tmp_path / "hub" / repo_id / "config.json").read_text())["architectures"] == [
            "GlmMoeDsaForCausalLM"]
        assert (1 << 20) < names["model.safetensors"]["size"] < (1 << 20) + 4096 and "lfs" in names["model.safetensors"]
    finally:
        hub.stop_server(pid)
