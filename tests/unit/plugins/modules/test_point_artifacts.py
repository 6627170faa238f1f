"""point_artifacts: a point's files read with secrets redacted, and the early stop of the server after the read."""

from __future__ import annotations

import pytest
from ansible.module_utils import basic
from ansible_collections.moesweep.sweep.plugins.modules import point_artifacts


@pytest.fixture
def systemctl(monkeypatch):
    """Every command the module runs, answered by ``answers[argv[1]]`` (rc, stdout, stderr)."""
    calls, answers = [], {}

    def run_command(self, argv, **kw):
        calls.append(list(argv))
        return answers.get(argv[1], (0, "", ""))

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: "/usr/bin/" + name)
    return calls, answers


def test_files_are_read_with_the_secrets_of_env_files_redacted(run_module, tmp_path, systemctl):
    (tmp_path / "unit.env").write_text("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz123456\nNCCL_DEBUG=INFO\n")
    kind, r = run_module(point_artifacts, {"files": {"unit.env": str(tmp_path / "unit.env"),
                                                      "gone.json": str(tmp_path / "gone.json")},
                                            "env_files": ["unit.env"]})
    assert kind == "exit" and r["changed"] is False and r["stopped"] is False and r["stop_error"] == ""
    env = r["artifacts"]["unit.env"]["content"]
    assert "hf_abcdefghijklmnop" not in env and "<redacted>" in env and "NCCL_DEBUG=INFO" in env
    assert r["artifacts"]["gone.json"]["missing"] is True
    assert systemctl[0] == []  # nothing stopped, no journal asked for


def test_the_server_is_stopped_without_waiting_after_its_journal_is_read(run_module, tmp_path, systemctl):
    calls, _answers = systemctl
    kind, r = run_module(point_artifacts, {"invocation_id": "0" * 32, "stop_unit": "sglang"})
    assert kind == "exit" and r["changed"] is True and r["stopped"] is True and r["stop_error"] == ""
    assert [c[0] for c in calls] == ["/usr/bin/journalctl", "/usr/bin/systemctl"]
    assert calls[1] == ["/usr/bin/systemctl", "stop", "--no-block", "sglang.service"]


def test_a_unit_systemd_does_not_know_is_reported_not_failed(run_module, systemctl):
    _calls, answers = systemctl
    answers["stop"] = (5, "", "Failed to stop sglang.service: Unit sglang.service not loaded.\n")
    kind, r = run_module(point_artifacts, {"stop_unit": "sglang.service"})
    assert kind == "exit" and r["changed"] is False and r["stopped"] is False
    assert r["stop_error"] == "Failed to stop sglang.service: Unit sglang.service not loaded."


def test_a_bad_unit_name_is_refused_before_anything_is_read(run_module, systemctl):
    kind, r = run_module(point_artifacts, {"stop_unit": "sglang; reboot"})
    assert kind == "fail" and r["msg"].startswith("stop_unit: unit 'sglang; reboot' is not a valid systemd unit name")
    assert systemctl[0] == []
