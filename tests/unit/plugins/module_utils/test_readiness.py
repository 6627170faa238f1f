# ruff: noqa: E501  (verbatim SGLang log lines are long)
"""The readiness engine (module_utils/readiness.py): the waiter driven by real corpus logs on a fake clock,
through scripted journal / health / systemd sources."""

from __future__ import annotations

import pytest
from ansible_collections.moesweep.sweep.plugins.module_utils.readiness import (
    Waiter,
    compress,
)
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


def test_compress_counts_repeated_health_codes():
    assert compress(["refused", "refused", 503, 200]) == [
        {"code": "refused", "count": 2}, {"code": 503, "count": 1}, {"code": 200, "count": 1}]


class HistoryJournal(FakeJournal):
    """A running unit's history: every entry is already there, each with its own wall-clock time."""

    def __init__(self, clock, entries):
        super().__init__(clock, [])
        self.entries = list(entries)

    def read_entries(self):
        out, self.entries = self.entries, []
        return out


def test_running_server_stuck_long_ago_is_a_hang_at_once():
    """A unit found running whose last line is older than the stall timeout hangs now, in its real phase,
    without waiting another stall_timeout."""
    clock = Clock()
    wall = 2_000_000.0
    lines = corpus("hang_capture_registering.log")
    entries = [(line, wall - 900 + i * 0.01) for i, line in enumerate(lines)]
    w = Waiter(HistoryJournal(clock, entries), lambda: "refused",
               lambda: {"ActiveState": "active", "MainPID": "42"}, clock=clock, wall_clock=lambda: wall,
               timeout=60.0, stall_timeout=300.0, confirm_with_health=True)
    state, elapsed = w.run()
    r = w.result(state, elapsed)
    assert (state, r["phase"]) == ("hang", "cuda_graph") and elapsed < 1.0


def test_ready_history_needs_a_health_answer():
    clock = Clock()
    lines = corpus("starting_deprecated_endpoint_warmup.log") + READY_TAIL
    entries = [(line, None) for line in lines]
    # a SIGSTOPped server: probes never finish
    w = Waiter(HistoryJournal(clock, entries), lambda: None, lambda: {"ActiveState": "active"}, clock=clock,
               timeout=600.0, confirm_with_health=True, health_timeout=25.0)
    state, elapsed = w.run()
    r = w.result(state, elapsed)
    assert (state, r["phase"], r["after_ready"]) == ("hang", "serving", True)
    assert 25.0 <= elapsed < 26.0 and "no answer within 25 s" in r["decisive_line"]
    # a healthy one
    clock = Clock()
    codes = iter([None, None, 200])
    w = Waiter(HistoryJournal(clock, [(line, None) for line in lines]), lambda: next(codes, None),
               lambda: {"ActiveState": "active"}, clock=clock, confirm_with_health=True)
    assert w.run()[0] == "ready"
