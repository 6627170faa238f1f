"""sglang_start: start a unit that does not run and return its run to wait for later, through AnsibleModule, with
the systemctl boundary patched (helpers/sglang_unit.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.moesweep.sweep.plugins.modules import sglang_start
from helpers.sglang_unit import INACTIVE, STARTED, bin_path, patch_sources


@pytest.fixture
def start(run_module, monkeypatch):
    bin_path(monkeypatch)
    return lambda args: run_module(sglang_start, args)


def test_start_returns_the_run_to_judge_later(start, monkeypatch):
    calls = patch_sources(monkeypatch, [], [], [INACTIVE, STARTED])
    kind, r = start({"unit": "sglang.service"})
    assert kind == "exit" and r["changed"] is True and r["started"] is True
    assert r["invocation_id"] == "0123abcd" and "state" not in r and "waited" not in r
    assert ["/usr/bin/systemctl", "start", "sglang.service"] in calls["run"]
    assert calls["run"][0][:3] == ["/usr/bin/systemctl", "show", "sglang.service"]
    assert "history" not in calls  # no journal read: nothing was judged
    assert r["msg"] == "started sglang.service (run 0123abcd)"


def test_a_unit_that_runs_is_left_alone(start, monkeypatch):
    calls = patch_sources(monkeypatch, [], [], [STARTED])
    kind, r = start({"unit": "sglang"})
    assert kind == "exit" and r["changed"] is False and r["started"] is False and r["invocation_id"] == "0123abcd"
    assert [c[1] for c in calls["run"]] == ["show"]


def test_start_failure(start, monkeypatch):
    patch_sources(monkeypatch, [], [], [INACTIVE], start_rc=5)
    kind, r = start({"unit": "sglang.service"})
    assert kind == "fail" and "systemctl start sglang.service failed" in r["msg"] and "not found" in r["msg"]
    assert r["rc"] == 5 and r["started"] is False and r["changed"] is False


def test_check_mode_predicts_the_start(start, monkeypatch):
    calls = patch_sources(monkeypatch, [], [], [INACTIVE])
    kind, r = start({"unit": "sglang.service", "_ansible_check_mode": True})
    assert kind == "exit" and r["changed"] is True and r["started"] is True and "history" not in calls
    assert not any(c[1] == "start" for c in calls["run"])
    calls = patch_sources(monkeypatch, [], [], [STARTED])
    kind, r = start({"unit": "sglang.service", "_ansible_check_mode": True})
    assert kind == "exit" and r["changed"] is False and r["invocation_id"] == "0123abcd"


def test_bad_unit_fails_early(start, monkeypatch):
    calls = patch_sources(monkeypatch, [], [], [INACTIVE])
    kind, r = start({"unit": "sglang;reboot"})
    assert kind == "fail" and "not a valid systemd unit name" in r["msg"] and calls["run"] == []


def test_documentation_matches_argument_spec():
    import re

    import yaml

    doc = yaml.safe_load(sglang_start.DOCUMENTATION)
    spec = set(re.findall(r"^\s{12}(\w+)=dict\(", Path(sglang_start.__file__).read_text(), re.M))
    assert set(doc["options"]) == spec == {"unit"}
    yaml.safe_load(sglang_start.EXAMPLES)
    assert {"started", "invocation_id", "unit_state", "msg"} == set(yaml.safe_load(sglang_start.RETURN))
