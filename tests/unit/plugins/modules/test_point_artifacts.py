"""point_artifacts: a point's files and the journal of its server run read with secrets redacted; nothing changed."""

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
    assert kind == "exit" and r["changed"] is False and set(r) >= {"artifacts"} and "stopped" not in r
    env = r["artifacts"]["unit.env"]["content"]
    assert "hf_abcdefghijklmnop" not in env and "<redacted>" in env and "NCCL_DEBUG=INFO" in env
    assert r["artifacts"]["gone.json"]["missing"] is True
    assert systemctl[0] == []  # no command at all: no journal asked for


def test_the_journal_of_the_run_is_read_and_nothing_else_runs(run_module, systemctl):
    """The early stop is the server role's stop entry point, after this read (its journal holds no shutdown lines)."""
    calls, answers = systemctl
    answers["_SYSTEMD_INVOCATION_ID=" + "0" * 32] = (0, '{"MESSAGE": "Uvicorn running", "__REALTIME_TIMESTAMP": "1"}\n',
                                                      "")
    kind, r = run_module(point_artifacts, {"invocation_id": "0" * 32})
    assert kind == "exit" and r["changed"] is False
    assert [c[0] for c in calls] == ["/usr/bin/journalctl"]
    assert r["artifacts"]["journal.txt"]["content"] == "Uvicorn running\n"


def test_it_has_no_option_that_stops_a_unit(run_module, systemctl):
    kind, r = run_module(point_artifacts, {"stop_unit": "sglang.service"})
    assert kind == "fail" and "stop_unit" in r["msg"]
    assert systemctl[0] == []
