"""gpu_released, port_owner and the /proc/net/tcp parser, fed real recorded output."""

from __future__ import annotations

from unittest import mock

import pytest
from ansible.module_utils import basic

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import ports
from ansible_collections.moesweep.sweep.plugins.modules import gpu_released, port_owner
from helpers.paths import FIXTURES as FIXTURES_ROOT

FIX = FIXTURES_ROOT
DEVICE = FIX / "nvidia-smi" / "h200-x1-device"


def test_parse_proc_net_tcp_recorded():
    socks = ports.parse_proc_net_tcp((FIX / "proc" / "net-tcp.txt").read_text())
    listening = [(s["local_port"], s["inode"]) for s in socks if s["state"] == ports.TCP_LISTEN]
    assert listening == [(2024, 1151), (37915, 209212)]
    assert len(socks) == 3


def test_parse_proc_net_tcp6_recorded():
    socks = ports.parse_proc_net_tcp((FIX / "proc" / "net-tcp6.txt").read_text())
    assert [(s["local_port"], s["state"], s["inode"]) for s in socks] == [(22, "0A", 136630)]


def test_listeners_names_the_owner(tmp_path):
    proc = tmp_path / "proc"
    (proc / "net").mkdir(parents=True)
    (proc / "net" / "tcp").write_text((FIX / "proc" / "net-tcp.txt").read_text())
    (proc / "4242" / "fd").mkdir(parents=True)
    (proc / "4242" / "cmdline").write_bytes(b"python3\0-m\0http.server\0002024\0")
    (proc / "4242" / "fd" / "3").symlink_to("socket:[1151]")
    assert ports.listeners(2024, proc_root=str(proc)) == [{"pid": 4242, "cmdline": "python3 -m http.server 2024"}]
    assert ports.listeners(8000, proc_root=str(proc)) == []
    # a listener whose owner is not visible is still reported, not silently ignored
    assert ports.listeners(37915, proc_root=str(proc))[0]["pid"] is None


def test_a_listener_gone_by_the_end_of_the_scan_is_no_listener(tmp_path, monkeypatch):
    """The race a sweep meets: the previous point's server, stopped without waiting, still listens when
    /proc/net/tcp is read and has exited (its socket closed with it) when the processes are scanned."""
    proc = tmp_path / "proc"
    (proc / "net").mkdir(parents=True)
    recorded = (FIX / "proc" / "net-tcp.txt").read_text()
    (proc / "net" / "tcp").write_text(recorded)
    real = ports.listening_inodes
    reads = []

    def exits_during_the_scan(port, proc_root="/proc"):
        reads.append(port)
        if len(reads) == 2:  # the server exited between the two reads: its LISTEN line is gone
            (proc / "net" / "tcp").write_text(recorded.splitlines()[0] + "\n")
        return real(port, proc_root)

    monkeypatch.setattr(ports, "listening_inodes", exits_during_the_scan)
    assert ports.listeners(2024, proc_root=str(proc)) == []
    assert reads == [2024, 2024]


@pytest.fixture
def release(run_module):
    """gpu_released through the shared harness: ``answers`` a list of (compute-apps csv, query-gpu csv) per poll;
    ``systemctl`` a list that records any systemctl call, its first item the unit's ActiveState. Returns (kind,
    result)."""

    def call(args, answers, systemctl=None):
        seq = iter(answers)
        state = {}

        def run_command(self, argv, **kw):
            if argv[0].endswith("systemctl"):
                systemctl.append(argv[1:])
                return 0, f"ActiveState={systemctl[0]}\n" if argv[1] == "show" else "", ""
            if argv[1].startswith("--query-compute-apps"):
                state["cur"] = next(seq)
                return 0, state["cur"][0], ""
            return 0, state["cur"][1], ""

        with (
            mock.patch.object(basic.AnsibleModule, "run_command", run_command),
            mock.patch.object(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: "/usr/bin/" + name),
            mock.patch("os.path.exists", return_value=True),
            mock.patch.object(gpu_released.time, "sleep", lambda s: None),
            mock.patch.object(gpu_released.ports, "listeners", lambda port: []),
        ):
            return run_module(gpu_released, args)

    return call


BUSY = (DEVICE / "compute-apps-under-bf16-matmul.csv").read_text()
IDLE = (DEVICE / "compute-apps-idle.csv").read_text()


def test_released_after_the_process_left(release):
    kind, r = release({"timeout": 5, "poll_interval": 0.01}, [(BUSY, "0, 21700\n"), (IDLE, "0, 3\n")])
    assert kind == "exit"
    assert r["released"] is True and r["holders"] == [] and r["memory_used_mib"] == [3]


def test_timeout_names_the_pid_still_holding_the_gpu(release):
    with mock.patch.object(gpu_released.time, "monotonic", side_effect=[0.0, 0.0, 10.0]):
        kind, r = release({"timeout": 5, "poll_interval": 0.01}, [(BUSY, "0, 21700\n"), (BUSY, "0, 21700\n")])
    assert kind == "fail"
    assert "PID 891 (/opt/torch/.venv/bin/python3) holds 21700 MiB on GPU 00000000:00:06.0" in r["msg"]
    assert r["released"] is False and "elapsed" in r


def test_check_mode_reports_once_without_waiting(release):
    kind, r = release({"timeout": 5, "_ansible_check_mode": True}, [(BUSY, "0, 21700\n")])
    assert kind == "exit" and r["released"] is False and r["changed"] is False


def test_it_only_observes_and_never_calls_systemctl(release):
    """The stop before the wait is a task of its own (the server role's stop entry point); the stop-then-wait protocol
    of sglang_restart is module_utils/test_release.py's."""
    calls = ["active"]
    kind, r = release({"timeout": 5, "poll_interval": 0.01}, [(BUSY, "0, 21700\n"), (IDLE, "0, 3\n")],
                      systemctl=calls)
    assert kind == "exit" and r["released"] is True and r["changed"] is False and "stopped" not in r
    assert calls == ["active"]
    kind, r = release({"timeout": 5, "stop_unit": "sglang.service"}, [(IDLE, "0, 3\n")], systemctl=calls)
    assert kind == "fail" and "stop_unit" in r["msg"] and calls == ["active"]


@pytest.mark.parametrize("args,msg", [({"timeout": 0}, "timeout must be greater than 0"),
                                      ({"port": 70000}, "port must be between 0 and 65535")])
def test_bad_input(args, msg, release):
    kind, r = release(args, [])
    assert kind == "fail" and msg in r["msg"]


SQUATTER = {"pid": 901, "cmdline": "python3 -m http.server 8000", "unit": "squatter.service"}


def run_port_owner(run_module, monkeypatch, found, **args):
    monkeypatch.setattr(port_owner.ports, "owners", lambda port: [dict(f) for f in found])
    return run_module(port_owner, dict(port=8000, **args))


def test_port_owner_reports_without_refusing(run_module, monkeypatch):
    kind, res = run_port_owner(run_module, monkeypatch, [SQUATTER])
    assert kind == "exit" and res["in_use"] and res["listeners"] == [SQUATTER]


def test_port_owner_refuses_a_listener_outside_the_allowed_unit(run_module, monkeypatch):
    kind, res = run_port_owner(run_module, monkeypatch, [SQUATTER], allowed_unit="sglang.service",
                               fix="stop that process or choose another port in sglang_server_flags.port")
    assert kind == "fail"
    assert res["msg"] == ("port 8000 is already in use by PID 901 (python3 -m http.server 8000, unit "
                          "squatter.service); stop that process or choose another port in sglang_server_flags.port")
    kind, res = run_port_owner(run_module, monkeypatch, [dict(SQUATTER, unit="sglang.service")],
                               allowed_unit="sglang.service")
    assert kind == "exit" and res["in_use"]
