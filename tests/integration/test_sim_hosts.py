"""The simulated host tooling: boot, reach over SSH with Ansible, tear down without leftovers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, _can_boot_hosts, run_ansible

pytestmark = pytest.mark.hosts


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
    return {
        "netns": [line for line in netns.splitlines() if line.startswith(prefix)],
        "veth": [line for line in links.splitlines() if "msw-v" in line],
        "nspawn": [line for line in procs.splitlines() if "moesweep-sim" in line or "-M sim-" in line],
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
