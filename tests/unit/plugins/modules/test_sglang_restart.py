# ruff: noqa: E501  (verbatim nvidia-smi lines are long)
"""sglang_restart: the stop, the release wait, the start and the wait for that run in one call, through
AnsibleModule, with the journal / HTTP / systemctl / nvidia-smi boundaries patched (helpers/sglang_unit.py; the
release wait itself is tested in module_utils/test_release.py, the wait loop in module_utils/test_readiness.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.moesweep.sweep.plugins.modules import sglang_restart
from helpers.sglang_unit import (
    BUSY,
    FAILED,
    IDLE,
    INACTIVE,
    READY_TAIL,
    STARTED,
    bin_path,
    corpus,
    patch_sources,
)


@pytest.fixture
def restart(run_module, monkeypatch):
    bin_path(monkeypatch)
    return lambda args: run_module(sglang_restart, args)


@pytest.fixture
def smi_path(tmp_path):
    path = tmp_path / "nvidia-smi"
    path.write_text("")
    return str(path)


def test_restart_starts_the_unit_and_reports_a_real_oom_crash(restart, monkeypatch, smi_path):
    calls = patch_sources(monkeypatch, corpus("oom_kv_pool_compose.log"), ["refused"] * 100,
                          [INACTIVE, INACTIVE, STARTED, STARTED, FAILED], smi=[IDLE])
    kind, r = restart({"unit": "sglang", "timeout": 10, "poll_interval": 0.01,
                       "release": {"poll_interval": 0.01, "nvidia_smi_path": smi_path}})
    assert kind == "fail"
    assert (r["state"], r["cause"], r["phase"]) == ("crashed", "oom", "kv_cache")
    assert r["unit_state"]["ExecMainStatus"] == "9"
    assert r["elapsed"] > 0 and r["waited"] is True and r["started"] is True and r["changed"] is True
    assert ["/usr/bin/systemctl", "start", "sglang.service"] in calls["run"]
    # a unit that did not run is not stopped: only released, then started
    assert r["released"]["stopped"] is False and r["released"]["released"] is True
    assert not any(c[1] == "stop" for c in calls["run"] if c[0].endswith("systemctl"))
    # only the lines of the run that was started: the journal is matched on its InvocationID
    assert calls["history"][:2] == ["/usr/bin/journalctl", "_SYSTEMD_INVOCATION_ID=0123abcd"]
    assert "--follow" not in calls["history"]
    assert calls["cmd"][:2] == ["/usr/bin/journalctl", "_SYSTEMD_INVOCATION_ID=0123abcd"]
    last = f"c{len(corpus('oom_kv_pool_compose.log')) - 1}"
    assert "--follow" in calls["cmd"] and "--after-cursor=" + last in calls["cmd"]
    assert calls["run"][0][:3] == ["/usr/bin/systemctl", "show", "sglang.service"]
    assert "crashed (oom) during kv_cache" in r["msg"]


def test_restart_ready(restart, monkeypatch, smi_path):
    calls = patch_sources(monkeypatch, corpus("starting_deprecated_endpoint_warmup.log") + READY_TAIL, [503, 503],
                          [INACTIVE, INACTIVE, STARTED], smi=[IDLE])
    kind, r = restart({"unit": "sglang.service", "timeout": 10, "poll_interval": 0.01, "api_key": "sekret",
                       "release": {"nvidia_smi_path": smi_path}})
    assert kind == "exit" and r["state"] == "ready" and r["changed"] is True
    assert r["invocation_id"] == "0123abcd"
    assert r["released"]["port_holders"] == [] and "msg" not in r["released"]
    # the release port is the server's port unless given
    assert calls["url"] == "http://127.0.0.1:30000/health"


def test_release_stops_the_old_run_waits_for_the_gpus_then_starts(restart, monkeypatch, smi_path):
    calls = patch_sources(monkeypatch, READY_TAIL, [200] * 10, [STARTED, INACTIVE, STARTED], smi=[BUSY, IDLE])
    kind, r = restart({"unit": "sglang.service", "timeout": 10, "poll_interval": 0.01,
                       "release": {"timeout": 5, "poll_interval": 0.01, "nvidia_smi_path": smi_path}})
    assert kind == "exit" and r["state"] == "ready" and r["changed"] is True and r["started"] is True
    assert r["released"]["stopped"] is True and r["released"]["released"] is True
    assert r["released"]["memory_used_mib"] == [3] and "msg" not in r["released"]
    verbs = [c[1] for c in calls["run"] if c[0].endswith("systemctl")]
    assert verbs[:3] == ["show", "stop", "show"] and verbs.index("stop") < verbs.index("start")


def test_release_not_in_time_names_the_holder_and_starts_nothing(restart, monkeypatch, smi_path):
    calls = patch_sources(monkeypatch, [], [], [STARTED], smi=[BUSY] * 1000)
    kind, r = restart({"unit": "sglang.service",
                       "release": {"timeout": 0.05, "poll_interval": 0.01, "nvidia_smi_path": smi_path}})
    assert kind == "fail" and r["released"]["released"] is False and r["changed"] is True
    assert "PID 891 (/opt/torch/.venv/bin/python3) holds 21700 MiB on GPU 00000000:00:06.0" in r["msg"]
    assert r["msg"].endswith("sglang.service was not started")
    assert not any(c[1] == "start" for c in calls["run"] if c[0].endswith("systemctl"))
    assert r["started"] is False and r["waited"] is False and r["state"] is None


def test_a_start_that_fails_after_the_release(restart, monkeypatch, smi_path):
    patch_sources(monkeypatch, [], [], [STARTED, INACTIVE], start_rc=5, smi=[IDLE])
    kind, r = restart({"unit": "sglang.service", "release": {"nvidia_smi_path": smi_path}})
    assert kind == "fail" and "systemctl start sglang.service failed" in r["msg"] and "not found" in r["msg"]
    assert r["rc"] == 5 and r["changed"] is True and r["started"] is False and r["released"]["stopped"] is True


def test_release_check_mode_and_bad_input(restart, monkeypatch, smi_path):
    calls = patch_sources(monkeypatch, [], [], [STARTED], smi=[BUSY])
    kind, r = restart({"unit": "sglang.service", "_ansible_check_mode": True,
                       "release": {"nvidia_smi_path": smi_path}})
    assert kind == "exit" and r["changed"] is True and r["waited"] is False and r["released"] == {}
    assert calls["run"] == []  # nothing stopped, looked at or started
    kind, r = restart({"unit": "sglang.service", "release": {"timeout": 0}})
    assert kind == "fail" and "release: timeout must be greater than 0" in r["msg"]
    kind, r = restart({"unit": "sglang.service", "release": {"nvidia_smi_path": smi_path + ".gone"}})
    assert kind == "fail" and "nvidia-smi not in PATH" in r["msg"] and "was not started" in r["msg"]
    assert calls["run"] == []


@pytest.mark.parametrize(
    "args,needle",
    [
        ({"unit": "sglang;reboot"}, "not a valid systemd unit name"),
        ({"unit": "sglang", "timeout": 0}, "timeout must be greater than 0"),
        ({"unit": "sglang", "port": 70000}, "port must be"),
        ({"unit": "sglang", "node_rank": -1}, "node_rank must be >= 0"),
    ],
)
def test_bad_input_fails_early_with_elapsed(restart, monkeypatch, args, needle):
    calls = patch_sources(monkeypatch, [], [], [STARTED])
    kind, r = restart(args)
    assert kind == "fail" and needle in r["msg"] and r["elapsed"] == 0.0
    assert calls["run"] == []  # nothing stopped


def test_documentation_matches_argument_spec():
    import re

    import yaml
    from ansible_collections.moesweep.sweep.plugins.doc_fragments.readiness import ModuleDocFragment
    from ansible_collections.moesweep.sweep.plugins.module_utils import readiness

    doc = yaml.safe_load(sglang_restart.DOCUMENTATION)
    assert "moesweep.sweep.readiness" in doc["extends_documentation_fragment"]
    documented = set(doc["options"]) | set(yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"])
    spec = set(re.findall(r"^\s{12}(\w+)=dict\(", Path(sglang_restart.__file__).read_text(), re.M))
    assert documented == spec | set(readiness.wait_spec())
    assert set(doc["options"]["release"]["suboptions"]) == set(sglang_restart.RELEASE_SPEC)
    yaml.safe_load(sglang_restart.EXAMPLES)
    ret = yaml.safe_load(sglang_restart.RETURN)
    assert {"state", "cause", "phase", "after_ready", "decisive_line", "traceback", "timeline", "elapsed",
            "health_sequence", "unit_state", "started", "released", "invocation_id"} <= set(ret)
