"""The stdout callback: a poll of a running job prints no FAILED - RETRYING line at default verbosity (re-probe #37
item 7: a passing sweep printed 152), and every other retry prints as ansible's default callback prints it."""

from __future__ import annotations

import configparser
from types import SimpleNamespace

import pytest
from ansible_collections.moesweep.sweep.plugins.callback import quiet_polls
from helpers.paths import REPO


class Display:
    def __init__(self, verbosity):
        self.verbosity = verbosity
        self.lines = []

    def display(self, text, **kw):
        self.lines.append(text)


def retry(res):
    host = SimpleNamespace(get_name=lambda: "h1")
    return SimpleNamespace(result=dict(res, retries=10, attempts=3), task_name="Benchmark", task="Benchmark",
                           host=host, _host=host)


@pytest.mark.parametrize("res,verbosity,shown", [
    ({"finished": False, "progress": {"levels": []}}, 0, False),  # sglang_bench_wait between two levels
    ({"finished": 0, "ansible_job_id": "j1.2"}, 1, False),  # async_status of the stack install
    ({"finished": False}, 2, True),
    ({"finished": True, "failed": True, "msg": "x"}, 0, True),  # an until that failed: said, as ansible says it
    ({"failed": True, "msg": "connection refused"}, 0, True),
])
def test_a_poll_of_a_running_job_is_quiet(res, verbosity, shown, monkeypatch):
    plugin = quiet_polls.CallbackModule()
    plugin._display = Display(verbosity)
    monkeypatch.setattr(plugin, "host_label", lambda result: "h1")
    monkeypatch.setattr(plugin, "_run_is_verbose", lambda result, verbosity=0: False)
    plugin.v2_runner_retry(retry(res))
    assert bool([line for line in plugin._display.lines if "FAILED - RETRYING" in line]) is shown


def test_the_repository_uses_it():
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "ansible.cfg")
    assert cfg["defaults"]["stdout_callback"] == "moesweep.sweep.quiet_polls"


def test_a_running_poll_with_a_progress_line_prints_that_line(monkeypatch):
    """The model's staging wait: one line per poll with the bytes, rate and time left, instead of nothing."""
    plugin = quiet_polls.CallbackModule()
    plugin._display = Display(0)
    monkeypatch.setattr(plugin, "host_label", lambda result: "sim-1")
    msg = "lukealonso/GLM-5-NVFP4: 120.3 of 453.0 GB, 210.0 MB/s, about 26 min left"
    plugin.v2_runner_retry(retry({"finished": False, "progress": {"bytes_done": 120300000000, "msg": msg}}))
    assert plugin._display.lines == ["sim-1: " + msg]
    # a benchmark's progress has no line: nothing, as before
    plugin._display.lines.clear()
    plugin.v2_runner_retry(retry({"finished": False, "progress": {"levels": [], "version": 2}}))
    assert plugin._display.lines == []
