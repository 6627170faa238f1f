"""module_utils/release: the restart protocol's stop and release wait, on nvidia-smi output recorded on the H200
device (bench/device)."""

from __future__ import annotations

import pytest
from ansible_collections.moesweep.sweep.plugins.module_utils import release
from helpers.paths import FIXTURES

DEVICE = FIXTURES / "nvidia-smi" / "h200-x1-device"
BUSY = ((DEVICE / "compute-apps-under-bf16-matmul.csv").read_text(), "0, 21700\n")
IDLE = ((DEVICE / "compute-apps-idle.csv").read_text(), "0, 3\n")


def commands(looks, active="active", stop_rc=0):
    """A run_command answering systemctl show / stop and nvidia-smi's two queries, one look after another."""
    seq, calls, cur = iter(looks), [], {}

    def run_command(argv, **kw):
        calls.append(argv[1:] if argv[0] == "systemctl" else argv[1])
        if argv[0] == "systemctl":
            if argv[1] == "show":
                return 0, f"ActiveState={active}\n", ""
            return stop_rc, "", "Job for sglang.service canceled." if stop_rc else ""
        if argv[1].startswith("--query-compute-apps"):
            cur["look"] = next(seq)
            return 0, cur["look"][0], ""
        return 0, cur["look"][1], ""
    return run_command, calls


def fake_clock():
    t = [0.0]

    def clock():
        return t[0]

    def sleep(s):
        t[0] += s
    return clock, sleep


def test_stops_a_running_unit_then_waits_until_the_gpu_is_free():
    run, calls = commands([BUSY, BUSY, IDLE])
    clock, sleep = fake_clock()
    r = release.release(run, "nvidia-smi", "systemctl", "sglang.service", port=30000, timeout=5, poll_interval=0.5,
                        clock=clock, sleep=sleep, listeners=lambda port: [])
    assert r["stopped"] is True and r["released"] is True and r["elapsed"] == 1.0 and "msg" not in r
    assert calls[:2] == [["show", "sglang.service", "-p", "ActiveState"], ["stop", "sglang.service"]]


@pytest.mark.parametrize("active, stops", [("active", True), ("activating", True), ("reloading", True),
                                           ("deactivating", True), ("failed", False), ("inactive", False)])
def test_the_stop_runs_only_for_a_unit_that_has_processes(active, stops):
    """systemd.unit_running or unit_stopping: a unit still stopping may hold the GPUs; systemctl stop waits for it."""
    run, calls = commands([IDLE], active=active)
    r = release.release(run, "nvidia-smi", "systemctl", "sglang.service", timeout=5, listeners=lambda port: [])
    assert r["stopped"] is stops and r["released"] is True
    systemctl = [c for c in calls if isinstance(c, list)]
    assert systemctl == [["show", "sglang.service", "-p", "ActiveState"]] + ([["stop", "sglang.service"]] if stops
                                                                              else [])


def test_not_released_names_every_holder():
    run, _ = commands([BUSY] * 20, active="inactive")
    clock, sleep = fake_clock()
    r = release.release(run, "nvidia-smi", "systemctl", "sglang.service", port=30000, timeout=2, poll_interval=0.5,
                        clock=clock, sleep=sleep,
                        listeners=lambda port: [{"pid": 4242, "cmdline": "python -m sglang.launch_server"}])
    assert r["stopped"] is False and r["released"] is False
    assert r["msg"] == ("GPUs not released after 2.0 s: PID 891 (/opt/torch/.venv/bin/python3) holds 21700 MiB on GPU "
                        "00000000:00:06.0; PID 4242 (python -m sglang.launch_server) listens on port 30000")


def test_memory_alone_above_the_limit_is_not_released():
    seen = {"holders": [], "port_holders": [], "memory_used_mib": [3, 2048]}
    assert not release.is_released(seen, 1024) and release.is_released(seen, 4096)
    assert "GPU memory still in use: [3, 2048] MiB (limit 1024 MiB per GPU)" in release.not_released_message(
        seen, 0, 1024, 1.0)


def test_check_mode_stops_nothing_and_looks_once():
    run, calls = commands([BUSY])
    r = release.release(run, "nvidia-smi", "systemctl", "sglang.service", check_mode=True, listeners=lambda port: [])
    assert r["stopped"] is True and r["released"] is False
    assert ["stop", "sglang.service"] not in calls


def test_a_failed_stop_is_an_error_naming_the_unit():
    run, _ = commands([IDLE], stop_rc=1)
    with pytest.raises(release.ReleaseError, match="systemctl stop sglang.service failed \\(rc 1\\)"):
        release.release(run, "nvidia-smi", "systemctl", "sglang.service")


@pytest.mark.parametrize("args,msg", [((0, 0.25, 0), "timeout must be greater than 0"),
                                      ((1, 0, 0), "poll_interval must be greater than 0"),
                                      ((1, 0.25, 70000), "port must be between 0 and 65535"),
                                      ((1, 0.25, 30000), None)])
def test_bad_input(args, msg):
    problem = release.bad_input(*args)
    assert problem is None if msg is None else msg in problem
