"""ports: who holds a port (with its systemd unit, from a recorded /proc/PID/cgroup) and the refusal of a port
held by anything but the server's own unit, the one message sglang_unit, port_owner and a node group's check give."""

from __future__ import annotations

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import ports
from helpers.paths import FIXTURES

PROC = FIXTURES / "proc"


def fake_proc(tmp_path, cgroup_text):
    proc = tmp_path / "proc"
    (proc / "net").mkdir(parents=True)
    (proc / "net" / "tcp").write_text((PROC / "net-tcp.txt").read_text())
    (proc / "4242" / "fd").mkdir(parents=True)
    (proc / "4242" / "cmdline").write_bytes(b"python3\0-m\0http.server\0002024\0")
    (proc / "4242" / "fd" / "3").symlink_to("socket:[1151]")
    (proc / "4242" / "cgroup").write_text(cgroup_text)
    return str(proc)


def test_owners_names_the_process_and_its_unit(tmp_path):
    proc = fake_proc(tmp_path, (PROC / "cgroup-systemd-run.txt").read_text())
    assert ports.owners(2024, proc_root=proc) == [
        {"pid": 4242, "cmdline": "python3 -m http.server 2024", "unit": "squatter.service"}]
    assert ports.owners(8000, proc_root=proc) == []


def test_a_process_outside_any_unit_has_none(tmp_path):
    proc = fake_proc(tmp_path, "0::/\n")
    assert ports.owners(2024, proc_root=proc)[0]["unit"] is None
    assert ports.unit_of(None, proc) is None and ports.unit_of(999, proc) is None


def test_the_own_unit_may_hold_its_port_anything_else_is_foreign():
    found = [{"pid": 812, "cmdline": "python3 -m sglang.launch_server", "unit": "sglang.service"},
             {"pid": 901, "cmdline": "python3 -m http.server 8000", "unit": "squatter.service"},
             {"pid": None, "cmdline": "unknown (socket inode [77])", "unit": None}]
    taken = ports.foreign(found, "sglang.service")
    assert [t["pid"] for t in taken] == [901, None]
    assert ports.foreign(found[:1], "sglang.service") == [] and ports.foreign(None, "sglang.service") == []


def test_the_refusal_names_every_holder_and_the_fix():
    taken = [{"pid": 901, "cmdline": "python3 -m http.server 8000", "unit": "squatter.service"},
             {"pid": 17, "cmdline": "nc -l 8000", "unit": None}]
    assert ports.in_use_message(8000, taken, "stop that process or choose another port") == (
        "port 8000 is already in use by PID 901 (python3 -m http.server 8000, unit squatter.service); "
        "PID 17 (nc -l 8000); stop that process or choose another port")


def test_a_port_outside_1_to_65535_is_named():
    assert ports.bad_port(8000) is None and ports.bad_port(1) is None and ports.bad_port(65535) is None
    assert ports.bad_port(0) == "port must be between 1 and 65535 (got 0)"
    assert ports.bad_port(65536) == "port must be between 1 and 65535 (got 65536)"
