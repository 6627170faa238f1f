# ruff: noqa: E501  (verbatim SGLang log lines are long)
"""sglang_ready: the waiter driven by real corpus logs through patched journal / HTTP / systemd sources,
and the module's argument handling and check mode through AnsibleModule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.moesweep.sweep.plugins.modules import sglang_ready
from ansible_collections.moesweep.sweep.plugins.modules.sglang_ready import Waiter, compress, parse_show, validate_unit
from helpers.paths import FIXTURES as FIXTURES_ROOT

FIXTURES = FIXTURES_ROOT / "sglang-logs"


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class FakeJournal:
    """Releases scripted lines at scripted times on the fake clock; wait_readable advances the clock."""

    def __init__(self, clock, script):
        self.clock = clock
        self.script = sorted((clock.now + offset, line) for offset, line in script)  # absolute times

    def read_messages(self):
        due = [s for s in self.script if s[0] <= self.clock.now]
        self.script = self.script[len(due):]
        return [line for _, line in due]

    def wait_readable(self, timeout):
        if self.script and self.script[0][0] <= self.clock.now + timeout:
            self.clock.now = max(self.clock.now, self.script[0][0])
            return True
        self.clock.now += timeout
        return False


def scripted(lines, start=0.0, step=0.01):
    return [(start + i * step, line) for i, line in enumerate(lines)]


def waiter(clock, script, health=None, unit=None, **kw):
    health = health or (lambda: "refused")
    unit = unit or (lambda: {"ActiveState": "active", "SubState": "running", "MainPID": "42"})
    kw.setdefault("timeout", 60.0)
    kw.setdefault("stall_timeout", 20.0)
    return Waiter(FakeJournal(clock, script), health, unit, clock=clock, **kw)


def corpus(name):
    return (FIXTURES / name).read_text(encoding="utf-8").splitlines()


READY_TAIL = [
    "[2026-10-30 12:01:09] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
    '[2026-10-30 12:01:12] INFO:     127.0.0.1:40004 - "POST /generate HTTP/1.1" 200 OK',
    "[2026-10-30 12:01:12] The server is fired up and ready to roll!",
]


def test_ready_from_log_line_within_half_a_second():
    clock = Clock()
    lines = corpus("starting_deprecated_endpoint_warmup.log") + READY_TAIL
    script = scripted(lines, step=0.5)
    fired_at = script[-1][0]
    w = waiter(clock, script)
    state, elapsed = w.run()
    assert state == "ready"
    assert elapsed - fired_at <= 0.5
    r = w.result(state, elapsed)
    assert r["decisive_line"] == "The server is fired up and ready to roll!"
    assert r["phase"] == "ready" and "warmup" in r["timeline"]


def test_ready_from_health_200_before_the_line_is_read():
    clock = Clock()
    codes = iter(["refused"] * 5 + [503] * 3 + [200])
    w = waiter(clock, scripted(corpus("starting_deprecated_endpoint_warmup.log")), health=lambda: next(codes))
    state, elapsed = w.run()
    assert state == "ready"
    r = w.result(state, elapsed)
    assert r["health_sequence"] == [{"code": "refused", "count": 5}, {"code": 503, "count": 3}, {"code": 200, "count": 1}]


@pytest.mark.parametrize(
    "name,cause,phase",
    [
        ("oom_graph_capture_deepep.log", "oom", "cuda_graph"),
        ("nccl_unhandled_system_error.log", "nccl", "init"),
        ("jit_ninja_ray.log", "jit_compile", "cuda_graph"),
        ("crash_warmup_502.log", "warmup_failed", "warmup"),
        ("crash_after_ready_dp.log", "other", "serving"),
        ("port_in_use_uvicorn.log", "port_in_use", "http_up"),
        ("flag_invalid_choice_attention_backend.log", "flag_error", "init"),
    ],
)
def test_crash_verdict_within_a_second_of_the_traceback(name, cause, phase):
    clock = Clock()
    lines = corpus(name)
    script = scripted(lines, start=1.0, step=0.001)
    written = script[-1][0]
    state_box = {"n": 0}

    def unit():
        # the unit dies a little after its last line, as SGLang's kill_process_tree does
        state_box["n"] += 1
        gone = clock.now - 1000.0 > written + 0.2
        return {"ActiveState": "failed" if gone else "active", "ExecMainCode": "2", "ExecMainStatus": "9"}

    w = waiter(clock, script, unit=unit)
    state, elapsed = w.run()
    r = w.result(state, elapsed)
    assert state == "crashed", r
    assert elapsed - written <= 1.0
    assert (r["cause"], r["phase"]) == (cause, phase)
    assert r["decisive_line"]
    assert r["unit_state"]["ActiveState"] in ("active", "failed")


def test_unit_killed_without_a_log_marker():
    clock = Clock()
    lines = corpus("starting_capture_tqdm_dp_ep.log")
    calls = {"n": 0}

    def unit():
        calls["n"] += 1
        return {"ActiveState": "failed" if calls["n"] > 20 else "active", "ExecMainCode": "2", "ExecMainStatus": "9"}

    w = waiter(clock, scripted(lines), unit=unit)
    state, elapsed = w.run()
    r = w.result(state, elapsed)
    assert (state, r["cause"], r["phase"]) == ("crashed", "killed", "cuda_graph")
    assert "ExecMainStatus=9" in r["decisive_line"]


def test_hang_when_the_log_stops_mid_capture():
    clock = Clock()
    w = waiter(clock, scripted(corpus("hang_capture_registering.log")), stall_timeout=5.0)
    state, elapsed = w.run()
    r = w.result(state, elapsed)
    assert state == "hang"
    assert r["phase"] == "cuda_graph"
    assert 5.0 <= elapsed <= 5.5


def test_slow_capture_that_prints_progress_is_not_a_hang_but_can_time_out():
    clock = Clock()
    lines = corpus("starting_capture_tqdm_dp_ep.log")
    w = waiter(clock, scripted(lines, step=2.0), stall_timeout=5.0, timeout=30.0)
    state, elapsed = w.run()
    assert state == "timeout"
    assert w.result(state, elapsed)["elapsed"] >= 30.0


def test_no_output_at_all_is_a_hang_after_stall_timeout():
    clock = Clock()
    w = waiter(clock, [], stall_timeout=3.0)
    state, elapsed = w.run()
    assert state == "hang" and 3.0 <= elapsed < 3.5


def test_helpers():
    assert compress(["refused", "refused", 503, 200]) == [
        {"code": "refused", "count": 2}, {"code": 503, "count": 1}, {"code": 200, "count": 1}]
    assert parse_show("ActiveState=failed\nExecMainStatus=9\n") == {"ActiveState": "failed", "ExecMainStatus": "9"}
    assert validate_unit("sglang") == ("sglang.service", None)
    assert validate_unit("sglang@glm5.service") == ("sglang@glm5.service", None)
    for bad in ("sglang; rm -rf /", "sg lang", "$(id)", "a|b", "-x", "", "x" * 300, "sglang.timer"):
        assert validate_unit(bad)[1], bad


# ---------------------------------------------------------------------------------------------- AnsibleModule
class Exit(Exception):
    def __init__(self, kind, result):
        super().__init__(kind)
        self.kind = kind
        self.result = result


@pytest.fixture
def run_module(monkeypatch):
    def _exit(self, **kw):
        raise Exit("exit", kw)

    def _fail(self, msg, **kw):
        kw["msg"] = msg
        raise Exit("fail", kw)

    monkeypatch.setattr(sglang_ready.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(sglang_ready.AnsibleModule, "fail_json", _fail)
    monkeypatch.setattr(sglang_ready.AnsibleModule, "get_bin_path", lambda self, name, required=False: "/usr/bin/" + name)

    def call(args):
        with patch_module_args(args), pytest.raises(Exit) as info:
            sglang_ready.main()
        return info.value.kind, info.value.result

    return call


def test_check_mode_is_a_no_op_waiter(run_module):
    kind, r = run_module({"unit": "sglang.service", "_ansible_check_mode": True})
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
    ],
)
def test_bad_input_fails_early_with_elapsed(run_module, args, needle):
    kind, r = run_module(args)
    assert kind == "fail"
    assert needle in r["msg"]
    assert r["elapsed"] == 0.0


def _patch_sources(monkeypatch, lines, health_codes, show_outputs):
    """Patch the real subprocess / HTTP / systemctl boundaries: journalctl JSON on a pipe, urlopen, run_command."""
    import os

    entries = "".join(json.dumps({"MESSAGE": line, "__CURSOR": f"c{i}"}) + "\n" for i, line in enumerate(lines))
    calls = {}

    class FakePopen:
        def __init__(self, cmd, **kw):
            calls["cmd"] = cmd
            r, w = os.pipe()
            os.write(w, entries.encode())
            os.close(w)
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

    monkeypatch.setattr(sglang_ready.subprocess, "Popen", FakePopen)
    codes = iter(health_codes)
    monkeypatch.setattr(sglang_ready, "probe_health", lambda url, key, timeout: calls.setdefault("url", url) and next(codes, 503))
    shows = iter(show_outputs)

    def run_command(self, args, **kw):
        calls.setdefault("show", args)
        return 0, next(shows, show_outputs[-1]), ""

    monkeypatch.setattr(sglang_ready.AnsibleModule, "run_command", run_command)
    return calls


def test_module_reports_a_real_oom_crash(run_module, monkeypatch):
    calls = _patch_sources(
        monkeypatch,
        corpus("oom_kv_pool_compose.log"),
        ["refused"] * 100,
        ["ActiveState=active\nSubState=running\n", "ActiveState=failed\nSubState=failed\nExecMainCode=2\nExecMainStatus=9\nNRestarts=0\nMainPID=0\n"],
    )
    kind, r = run_module({"unit": "sglang", "cursor": "s=abc;i=1", "timeout": 10, "poll_interval": 0.01})
    assert kind == "fail"
    assert (r["state"], r["cause"], r["phase"]) == ("crashed", "oom", "kv_cache")
    assert r["unit_state"]["ExecMainStatus"] == "9"
    assert r["elapsed"] > 0 and r["waited"] is True
    assert calls["cmd"][:3] == ["/usr/bin/journalctl", "-u", "sglang.service"]
    assert calls["cmd"][-2:] == ["--after-cursor", "s=abc;i=1"]
    assert calls["show"][:3] == ["/usr/bin/systemctl", "show", "sglang.service"]
    assert "crashed (oom) during kv_cache" in r["msg"]


def test_module_ready_and_fail_on_error_false(run_module, monkeypatch):
    _patch_sources(monkeypatch, corpus("starting_deprecated_endpoint_warmup.log") + READY_TAIL, [503, 503], ["ActiveState=active\n"])
    kind, r = run_module({"unit": "sglang.service", "timeout": 10, "poll_interval": 0.01, "api_key": "sekret"})
    assert kind == "exit" and r["state"] == "ready" and r["changed"] is False
    _patch_sources(monkeypatch, corpus("hang_capture_registering.log"), ["refused"] * 10000, ["ActiveState=active\n"])
    kind, r = run_module({"unit": "sglang.service", "timeout": 10, "stall_timeout": 0.3, "poll_interval": 0.01, "fail_on_error": False})
    assert kind == "exit" and r["state"] == "hang" and r["phase"] == "cuda_graph"


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
