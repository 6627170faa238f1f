# ruff: noqa: E501  (verbatim SGLang log lines are long)
"""sglang_ready: argument handling, check mode, start and invocation handling through AnsibleModule, with the
journal / HTTP / systemctl boundaries patched (the wait loop itself is tested in module_utils/test_readiness.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.moesweep.sweep.plugins.module_utils import readiness
from ansible_collections.moesweep.sweep.plugins.modules import sglang_ready
from helpers.paths import FIXTURES as FIXTURES_ROOT

FIXTURES = FIXTURES_ROOT / "sglang-logs"


def corpus(name):
    return (FIXTURES / name).read_text(encoding="utf-8").splitlines()


READY_TAIL = [
    "[2026-10-30 12:01:09] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
    '[2026-10-30 12:01:12] INFO:     127.0.0.1:40004 - "POST /generate HTTP/1.1" 200 OK',
    "[2026-10-30 12:01:12] The server is fired up and ready to roll!",
]


# ---------------------------------------------------------------------------------------------- AnsibleModule
@pytest.fixture
def ready(run_module, monkeypatch):
    monkeypatch.setattr(sglang_ready.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False: "/usr/bin/" + name)
    return lambda args: run_module(sglang_ready, args)


def test_check_mode_is_a_no_op_waiter(ready, monkeypatch):
    _patch_sources(monkeypatch, [], [], [STARTED])
    kind, r = ready({"unit": "sglang.service", "_ansible_check_mode": True})
    assert kind == "exit"
    assert r["waited"] is False and r["changed"] is False and r["elapsed"] == 0.0


@pytest.mark.parametrize(
    "args,needle",
    [
        ({"unit": "sglang;reboot"}, "not a valid systemd unit name"),
        ({"unit": "sglang", "timeout": 0}, "timeout must be greater than 0"),
        ({"unit": "sglang", "stall_timeout": -1}, "stall_timeout must be greater than 0"),
        ({"unit": "sglang", "poll_interval": 0}, "poll_interval must be greater than 0"),
        ({"unit": "sglang", "port": 70000}, "port must be"),
        ({"unit": "sglang", "health_timeout": 0}, "health_timeout must be greater than 0"),
    ],
)
def test_bad_input_fails_early_with_elapsed(ready, args, needle):
    kind, r = ready(args)
    assert kind == "fail"
    assert needle in r["msg"]
    assert r["elapsed"] == 0.0


def _patch_sources(monkeypatch, lines, health_codes, show_outputs, start_rc=0, smi=()):
    """Patch the real subprocess / HTTP / systemctl boundaries: journalctl JSON on a pipe, the health probe,
    run_command (systemctl show / start / stop, and nvidia-smi's answers ``smi``: (compute apps CSV, memory CSV)
    per look)."""
    import os

    entries = "".join(json.dumps({"MESSAGE": line, "__CURSOR": f"c{i}"}) + "\n" for i, line in enumerate(lines))
    calls = {"run": []}

    class FakePopen:
        def __init__(self, cmd, **kw):
            calls["cmd"] = cmd
            r, w = os.pipe()
            os.close(w)  # everything was in the history
            self.stdout = os.fdopen(r, "rb")
            self.returncode = None

        def poll(self):
            return self.returncode

        def terminate(self):
            self.returncode = -15

        def wait(self, timeout=None):
            return self.returncode

        def kill(self):
            self.returncode = -9

    monkeypatch.setattr(readiness.subprocess, "Popen", FakePopen)
    codes = iter(health_codes)
    monkeypatch.setattr(sglang_ready, "probe_health",
                        lambda url, key, timeout: calls.setdefault("url", url) and next(codes, 503))
    shows = iter(show_outputs)

    def run_command(self, args, **kw):
        calls["run"].append(list(args))
        if args[0].endswith("journalctl"):
            # the history read to the end first; the follower then starts after its last cursor
            calls["history"] = list(args)
            return 0, entries, ""
        if args[0].endswith("nvidia-smi"):
            if args[1].startswith("--query-compute-apps"):
                calls["smi"] = next(looks)
                return 0, calls["smi"][0], ""
            return 0, calls["smi"][1], ""
        if args[1] == "start":
            return start_rc, "", "Failed to start sglang.service: Unit sglang.service not found." if start_rc else ""
        if args[1] == "stop":
            return 0, "", ""
        return 0, next(shows, show_outputs[-1]), ""

    looks = iter(smi)
    monkeypatch.setattr(sglang_ready.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(sglang_ready.ports, "listeners", lambda port: [])
    return calls


INACTIVE = "ActiveState=inactive\nSubState=dead\nInvocationID=\n"
STARTED = "ActiveState=active\nSubState=running\nInvocationID=0123abcd\nMainPID=42\n"
FAILED = "ActiveState=failed\nSubState=failed\nExecMainCode=2\nExecMainStatus=9\nNRestarts=0\nMainPID=0\nInvocationID=0123abcd\n"


def test_module_starts_the_unit_and_reports_a_real_oom_crash(ready, monkeypatch):
    calls = _patch_sources(monkeypatch, corpus("oom_kv_pool_compose.log"), ["refused"] * 100,
                           [INACTIVE, STARTED, STARTED, FAILED])
    kind, r = ready({"unit": "sglang", "start": True, "timeout": 10, "poll_interval": 0.01})
    assert kind == "fail"
    assert (r["state"], r["cause"], r["phase"]) == ("crashed", "oom", "kv_cache")
    assert r["unit_state"]["ExecMainStatus"] == "9"
    assert r["elapsed"] > 0 and r["waited"] is True and r["started"] is True and r["changed"] is True
    assert ["/usr/bin/systemctl", "start", "sglang.service"] in calls["run"]
    # only the lines of the run that was started: the journal is matched on its InvocationID
    assert calls["history"][:2] == ["/usr/bin/journalctl", "_SYSTEMD_INVOCATION_ID=0123abcd"]
    assert "--follow" not in calls["history"]
    assert calls["cmd"][:2] == ["/usr/bin/journalctl", "_SYSTEMD_INVOCATION_ID=0123abcd"]
    last = f"c{len(corpus('oom_kv_pool_compose.log')) - 1}"
    assert "--follow" in calls["cmd"] and "--after-cursor=" + last in calls["cmd"]
    assert calls["run"][0][:3] == ["/usr/bin/systemctl", "show", "sglang.service"]
    assert "crashed (oom) during kv_cache" in r["msg"]


def test_module_ready_and_fail_on_error_false(ready, monkeypatch):
    _patch_sources(monkeypatch, corpus("starting_deprecated_endpoint_warmup.log") + READY_TAIL, [503, 503],
                   [INACTIVE, STARTED])
    kind, r = ready({"unit": "sglang.service", "start": True, "timeout": 10, "poll_interval": 0.01,
                          "api_key": "sekret"})
    assert kind == "exit" and r["state"] == "ready" and r["changed"] is True
    assert r["invocation_id"] == "0123abcd"
    _patch_sources(monkeypatch, corpus("hang_capture_registering.log"), ["refused"] * 10000, [STARTED])
    kind, r = ready({"unit": "sglang.service", "timeout": 10, "stall_timeout": 0.3, "poll_interval": 0.01,
                          "fail_on_error": False})
    assert kind == "exit" and r["state"] == "hang" and r["phase"] == "cuda_graph"
    assert r["changed"] is False and r["started"] is False


def test_running_unit_whose_health_endpoint_is_gone_is_not_serving(ready, monkeypatch):
    """A re-run on a wedged server: its run's log says ready, its health endpoint refuses; no restart here
    (the caller decides), and the phase is serving, not init."""
    calls = _patch_sources(monkeypatch, corpus("starting_deprecated_endpoint_warmup.log") + READY_TAIL,
                           ["refused"] * 50, [STARTED])
    kind, r = ready({"unit": "sglang.service", "timeout": 10, "poll_interval": 0.01, "fail_on_error": False})
    assert kind == "exit" and r["state"] == "crashed" and r["phase"] == "serving" and r["after_ready"] is True
    assert "refused" in r["decisive_line"]
    assert not any(c[1] == "start" for c in calls["run"])


def test_start_failure_and_never_started_unit(ready, monkeypatch):
    _patch_sources(monkeypatch, [], [], [INACTIVE], start_rc=5)
    kind, r = ready({"unit": "sglang.service", "start": True})
    assert kind == "fail" and "systemctl start sglang.service failed" in r["msg"] and "not found" in r["msg"]
    _patch_sources(monkeypatch, [], [], [INACTIVE])
    kind, r = ready({"unit": "sglang.service", "fail_on_error": False})
    assert kind == "exit" and r["state"] == "stopped"


def test_check_mode_predicts_the_start(ready, monkeypatch):
    calls = _patch_sources(monkeypatch, [], [], [INACTIVE])
    kind, r = ready({"unit": "sglang.service", "start": True, "_ansible_check_mode": True})
    assert kind == "exit" and r["changed"] is True and r["waited"] is False
    assert not any(c[1] == "start" for c in calls["run"])


def test_documentation_matches_argument_spec():
    import yaml

    doc = yaml.safe_load(sglang_ready.DOCUMENTATION)
    documented = set(doc["options"])
    source = Path(sglang_ready.__file__).read_text()
    spec = set(__import__("re").findall(r"^\s{12}(\w+)=dict\(", source, __import__("re").M))
    assert documented == spec
    yaml.safe_load(sglang_ready.EXAMPLES)
    ret = yaml.safe_load(sglang_ready.RETURN)
    assert {"state", "cause", "phase", "after_ready", "decisive_line", "traceback", "timeline", "elapsed",
            "health_sequence", "unit_state"} <= set(ret)


# ---------------------------------------------------------------------------------------------- node groups
# What a multi-node server's rank >= 1 logs once its schedulers are ready (0.5.9 srt/utils/common.py,
# launch_dummy_health_check_server): no ready line ever follows, and only /ping, /health, /health_generate answer.
FOLLOWER_TAIL = [
    "[2026-10-30 12:01:09] Dummy health check server started in background thread at 0.0.0.0:8000",
]


def test_start_without_wait_returns_the_run_to_judge_later(ready, monkeypatch):
    calls = _patch_sources(monkeypatch, [], [], [INACTIVE, STARTED])
    kind, r = ready({"unit": "sglang.service", "start": True, "wait": False})
    assert kind == "exit" and r["changed"] is True and r["started"] is True and r["waited"] is False
    assert r["invocation_id"] == "0123abcd" and r["state"] is None
    assert ["/usr/bin/systemctl", "start", "sglang.service"] in calls["run"]
    assert "history" not in calls  # no journal read: nothing was judged


def test_a_follower_rank_is_ready_on_its_health_endpoint_without_a_ready_line(ready, monkeypatch):
    calls = _patch_sources(monkeypatch, FOLLOWER_TAIL, [503, 200], [STARTED])
    kind, r = ready({"unit": "sglang.service", "invocation_id": "0123abcd", "node_rank": 1, "timeout": 10,
                     "poll_interval": 0.01, "health_path": "/v1/models"})
    assert kind == "exit" and r["state"] == "ready" and r["node_rank"] == 1
    assert calls["url"] == "http://127.0.0.1:30000/health"  # the dummy server answers nothing else
    assert "node rank 1, health endpoint only" in r["msg"]


def test_the_run_to_judge_must_still_be_the_units_run(ready, monkeypatch):
    _patch_sources(monkeypatch, [], [], [STARTED])
    kind, r = ready({"unit": "sglang.service", "invocation_id": "ffff0000", "node_rank": 1})
    assert kind == "fail" and "not on run ffff0000" in r["msg"] and r["invocation_id"] == "0123abcd"
    kind, r = ready({"unit": "sglang.service", "invocation_id": "0123abcd", "start": True})
    assert kind == "fail" and "without start" in r["msg"]
    kind, r = ready({"unit": "sglang.service", "node_rank": -1})
    assert kind == "fail" and "node_rank must be >= 0" in r["msg"]


def test_a_killed_follower_rank_is_a_crash_with_systemds_verdict(ready, monkeypatch):
    _patch_sources(monkeypatch, [], ["refused"] * 100, [STARTED, FAILED])
    kind, r = ready({"unit": "sglang.service", "invocation_id": "0123abcd", "node_rank": 1, "timeout": 10,
                     "poll_interval": 0.01, "fail_on_error": False})
    assert kind == "exit" and r["state"] == "crashed" and r["cause"] == "killed"
    assert r["decisive_line"] == "unit failed: ExecMainCode=2 ExecMainStatus=9"


# ---------------------------------------------------------------------------------------------- release
# nvidia-smi on the H200 device (bench/device): a process holding the GPU, then none
DEVICE = FIXTURES_ROOT / "nvidia-smi" / "h200-x1-device"
BUSY = ((DEVICE / "compute-apps-under-bf16-matmul.csv").read_text(), "0, 21700\n")
IDLE = ((DEVICE / "compute-apps-idle.csv").read_text(), "0, 3\n")


@pytest.fixture
def smi_path(tmp_path):
    path = tmp_path / "nvidia-smi"
    path.write_text("")
    return str(path)


def test_release_stops_the_old_run_waits_for_the_gpus_then_starts(ready, monkeypatch, smi_path):
    calls = _patch_sources(monkeypatch, READY_TAIL, [200] * 10, [STARTED, INACTIVE, STARTED], smi=[BUSY, IDLE])
    kind, r = ready({"unit": "sglang.service", "start": True, "timeout": 10, "poll_interval": 0.01,
                     "release": {"timeout": 5, "poll_interval": 0.01, "nvidia_smi_path": smi_path}})
    assert kind == "exit" and r["state"] == "ready" and r["changed"] is True and r["started"] is True
    assert r["released"]["stopped"] is True and r["released"]["released"] is True
    assert r["released"]["memory_used_mib"] == [3] and "msg" not in r["released"]
    verbs = [c[1] for c in calls["run"] if c[0].endswith("systemctl")]
    assert verbs[:3] == ["show", "stop", "show"] and verbs.index("stop") < verbs.index("start")


def test_release_not_in_time_names_the_holder_and_starts_nothing(ready, monkeypatch, smi_path):
    calls = _patch_sources(monkeypatch, [], [], [STARTED], smi=[BUSY] * 1000)
    kind, r = ready({"unit": "sglang.service", "start": True,
                     "release": {"timeout": 0.05, "poll_interval": 0.01, "nvidia_smi_path": smi_path}})
    assert kind == "fail" and r["released"]["released"] is False and r["changed"] is True
    assert "PID 891 (/opt/torch/.venv/bin/python3) holds 21700 MiB on GPU 00000000:00:06.0" in r["msg"]
    assert r["msg"].endswith("sglang.service was not started")
    assert not any(c[1] == "start" for c in calls["run"] if c[0].endswith("systemctl"))


def test_release_check_mode_and_bad_input(ready, monkeypatch, smi_path):
    calls = _patch_sources(monkeypatch, [], [], [STARTED], smi=[BUSY])
    kind, r = ready({"unit": "sglang.service", "start": True, "_ansible_check_mode": True,
                     "release": {"nvidia_smi_path": smi_path}})
    assert kind == "exit" and r["changed"] is True and r["waited"] is False and r["released"] == {}
    assert calls["run"] == []  # nothing stopped, looked at or started
    kind, r = ready({"unit": "sglang.service", "release": {"nvidia_smi_path": smi_path}})
    assert kind == "fail" and "start=true" in r["msg"]
    kind, r = ready({"unit": "sglang.service", "start": True, "release": {"timeout": 0}})
    assert kind == "fail" and "release: timeout must be greater than 0" in r["msg"]
    kind, r = ready({"unit": "sglang.service", "start": True, "release": {"nvidia_smi_path": smi_path + ".gone"}})
    assert kind == "fail" and "nvidia-smi not in PATH" in r["msg"] and "was not started" in r["msg"]
