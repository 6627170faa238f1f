"""``moesweep sim``: what it refuses and what it never deletes, without booting a host.

Every case runs the real command in a subprocess against a private state directory
(MOESWEEP_SIM_STATE_DIR under tmp_path) and a PATH without systemd-nspawn, so even a missing check
could not boot a host; and inside a guard that refuses (exit 97) any deletion outside tmp_path, so a
regression fails the test instead of deleting the machine's files (``sim down --cluster /`` once meant
``shutil.rmtree("/")``)."""

from __future__ import annotations

import json
import os
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
