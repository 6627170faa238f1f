"""sglang_ready: argument handling, check mode and the judge of a unit's run through AnsibleModule, with the
journal / HTTP / systemctl boundaries patched (helpers/sglang_unit.py; the wait loop itself is tested in
module_utils/test_readiness.py). It never starts, stops or restarts the unit: test_sglang_start.py and
test_sglang_restart.py test the modules that do."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.moesweep.sweep.plugins.modules import sglang_ready
from helpers.sglang_unit import FAILED, INACTIVE, READY_TAIL, STARTED, bin_path, corpus, patch_sources


@pytest.fixture
def ready(run_module, monkeypatch):
    bin_path(monkeypatch)
    return lambda args: run_module(sglang_ready, args)


def test_check_mode_is_a_no_op_waiter(ready, monkeypatch):
    calls = patch_sources(monkeypatch, [], [], [STARTED])
    kind, r = ready({"unit": "sglang.service", "_ansible_check_mode": True})
    assert kind == "exit"
    assert r["waited"] is False and r["changed"] is False and r["elapsed"] == 0.0
    assert calls["run"] == []


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


@pytest.mark.parametrize("option", [{"start": True}, {"wait": False}, {"release": {"timeout": 5}}])
def test_it_starts_stops_and_restarts_nothing(ready, monkeypatch, option):
    """Its name says it waits: the options that started, released or only started the unit (sglang_start,
    sglang_restart now) are refused, and nothing is run."""
    calls = patch_sources(monkeypatch, [], [], [INACTIVE])
    kind, r = ready({"unit": "sglang.service", **option})
    assert kind == "fail" and "Unsupported parameters" in r["msg"] and next(iter(option)) in r["msg"]
    assert calls["run"] == []


def test_a_hung_run_is_judged_without_failing_with_fail_on_error_false(ready, monkeypatch):
    calls = patch_sources(monkeypatch, corpus("hang_capture_registering.log"), ["refused"] * 10000, [STARTED])
    kind, r = ready({"unit": "sglang.service", "timeout": 10, "stall_timeout": 0.3, "poll_interval": 0.01,
                     "fail_on_error": False})
    assert kind == "exit" and r["state"] == "hang" and r["phase"] == "cuda_graph"
    assert r["changed"] is False and "started" not in r
    # only the lines of the run it judges: the journal is matched on its InvocationID
    assert calls["history"][:2] == ["/usr/bin/journalctl", "_SYSTEMD_INVOCATION_ID=0123abcd"]
    assert not any(c[1] in ("start", "stop") for c in calls["run"] if c[0].endswith("systemctl"))


def test_running_unit_whose_health_endpoint_is_gone_is_not_serving(ready, monkeypatch):
    """A re-run on a wedged server: its run's log says ready, its health endpoint refuses; no restart here
    (the caller decides), and the phase is serving, not init."""
    calls = patch_sources(monkeypatch, corpus("starting_deprecated_endpoint_warmup.log") + READY_TAIL,
                          ["refused"] * 50, [STARTED])
    kind, r = ready({"unit": "sglang.service", "timeout": 10, "poll_interval": 0.01, "fail_on_error": False})
    assert kind == "exit" and r["state"] == "crashed" and r["phase"] == "serving" and r["after_ready"] is True
    assert "refused" in r["decisive_line"]
    assert not any(c[1] == "start" for c in calls["run"])


def test_never_started_unit(ready, monkeypatch):
    calls = patch_sources(monkeypatch, [], [], [INACTIVE])
    kind, r = ready({"unit": "sglang.service", "fail_on_error": False})
    assert kind == "exit" and r["state"] == "stopped" and r["waited"] is True and r["invocation_id"] is None
    assert "has not run since boot" in r["msg"] and "history" not in calls
    kind, r = ready({"unit": "sglang.service"})
    assert kind == "fail" and r["state"] == "stopped"


def test_documentation_matches_argument_spec():
    import yaml
    from ansible_collections.moesweep.sweep.plugins.doc_fragments.readiness import ModuleDocFragment
    from ansible_collections.moesweep.sweep.plugins.module_utils import readiness

    doc = yaml.safe_load(sglang_ready.DOCUMENTATION)
    assert "moesweep.sweep.readiness" in doc["extends_documentation_fragment"]
    documented = set(doc["options"]) | set(yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"])
    source = Path(sglang_ready.__file__).read_text()
    spec = set(__import__("re").findall(r"^\s{12}(\w+)=dict\(", source, __import__("re").M)) | set(
        readiness.wait_spec())
    assert documented == spec
    yaml.safe_load(sglang_ready.EXAMPLES)
    ret = yaml.safe_load(sglang_ready.RETURN)
    assert {"state", "cause", "phase", "after_ready", "decisive_line", "traceback", "timeline", "elapsed",
            "health_sequence", "unit_state"} <= set(ret)
    assert not {"started", "released"} & set(ret)


# ---------------------------------------------------------------------------------------------- node groups
# What a multi-node server's rank >= 1 logs once its schedulers are ready (0.5.9 srt/utils/common.py,
# launch_dummy_health_check_server): no ready line ever follows, and only /ping, /health, /health_generate answer.
FOLLOWER_TAIL = [
    "[2026-10-30 12:01:09] Dummy health check server started in background thread at 0.0.0.0:8000",
]


def test_a_follower_rank_is_ready_on_its_health_endpoint_without_a_ready_line(ready, monkeypatch):
    calls = patch_sources(monkeypatch, FOLLOWER_TAIL, [503, 200], [STARTED])
    kind, r = ready({"unit": "sglang.service", "invocation_id": "0123abcd", "node_rank": 1, "timeout": 10,
                     "poll_interval": 0.01, "health_path": "/v1/models"})
    assert kind == "exit" and r["state"] == "ready" and r["node_rank"] == 1
    assert calls["url"] == "http://127.0.0.1:30000/health"  # the dummy server answers nothing else
    assert "node rank 1, health endpoint only" in r["msg"]


def test_the_run_to_judge_must_still_be_the_units_run(ready, monkeypatch):
    patch_sources(monkeypatch, [], [], [STARTED])
    kind, r = ready({"unit": "sglang.service", "invocation_id": "ffff0000", "node_rank": 1})
    assert kind == "fail" and "not on run ffff0000" in r["msg"] and r["invocation_id"] == "0123abcd"
    kind, r = ready({"unit": "sglang.service", "node_rank": -1})
    assert kind == "fail" and "node_rank must be >= 0" in r["msg"]


def test_a_killed_follower_rank_is_a_crash_with_systemds_verdict(ready, monkeypatch):
    patch_sources(monkeypatch, [], ["refused"] * 100, [STARTED, FAILED])
    kind, r = ready({"unit": "sglang.service", "invocation_id": "0123abcd", "node_rank": 1, "timeout": 10,
                     "poll_interval": 0.01, "fail_on_error": False})
    assert kind == "exit" and r["state"] == "crashed" and r["cause"] == "killed"
    assert r["decisive_line"] == "unit failed: ExecMainCode=2 ExecMainStatus=9"
