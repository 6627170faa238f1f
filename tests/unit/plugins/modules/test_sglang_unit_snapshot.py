"""sglang_unit_snapshot: the unit file, its environment file and the unit's state read in one call, exactly as they
are, and the unit stopped without waiting only when asked, it has a unit file and it runs."""

from __future__ import annotations

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.modules import sglang_unit_snapshot

UNIT = "[Unit]\nDescription=SGLang server (triton)\n\n[Service]\nExecStart=/bin/true\n"
ENV = 'HF_TOKEN="hf_secret"\r\nNCCL_P2P_DISABLE="1"\n'  # written by hand on Windows once: line ends kept


class Systemctl:
    def __init__(self, active="active"):
        self.calls = []
        self.props = {"ActiveState": active, "SubState": "running" if active == "active" else "dead",
                      "LoadState": "loaded", "UnitFileState": "disabled", "MainPID": "4242",
                      "InvocationID": "5c1bd2f6a9e04e8e9a0f6c1d7b3e2a10"}

    def __call__(self, argv, environ_update=None, **_kw):
        self.calls.append(argv[1:])
        if argv[1] == "show":
            return 0, "".join(f"{k}={v}\n" for k, v in self.props.items()), ""
        return 0, "", ""


@pytest.fixture
def systemctl(monkeypatch):
    def make(**kw):
        s = Systemctl(**kw)
        monkeypatch.setattr(sglang_unit_snapshot.AnsibleModule, "run_command", lambda self, argv, **k: s(argv, **k))
        monkeypatch.setattr(sglang_unit_snapshot.AnsibleModule, "get_bin_path",
                            lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name)
        return s

    return make


def args(tmp_path, **kw):
    out = {"name": "sglang.service", "unit_path": str(tmp_path / "sglang.service"),
           "env_path": str(tmp_path / "sglang.env")}
    out.update(kw)
    return out


def files(tmp_path):
    (tmp_path / "sglang.service").write_text(UNIT)
    (tmp_path / "sglang.env").write_bytes(ENV.encode())


def test_reads_both_files_exactly_and_the_state_without_stopping(run_module, systemctl, tmp_path):
    s = systemctl()
    files(tmp_path)
    kind, res = run_module(sglang_unit_snapshot, args(tmp_path))
    assert kind == "exit", res
    assert res["unit_content"] == UNIT and res["env_content"] == ENV
    assert res["active"] and res["status"]["InvocationID"] == "5c1bd2f6a9e04e8e9a0f6c1d7b3e2a10"
    assert not res["changed"] and not res["stopped"] and [c[0] for c in s.calls] == ["show"]


@pytest.mark.parametrize("active", ["active", "activating", "reloading"])  # systemd.unit_running
def test_stop_stops_a_running_unit_without_waiting(run_module, systemctl, tmp_path, active):
    s = systemctl(active=active)
    files(tmp_path)
    kind, res = run_module(sglang_unit_snapshot, args(tmp_path, stop=True))
    assert kind == "exit" and res["changed"] and res["stopped"] and res["active"]
    assert s.calls[-1] == ["stop", "--no-block", "sglang.service"]


@pytest.mark.parametrize("active, with_files", [("inactive", True), ("failed", True), ("active", False)])
def test_stop_leaves_a_unit_that_does_not_run_or_has_no_unit_file(run_module, systemctl, tmp_path, active,
                                                                   with_files):
    s = systemctl(active=active)
    if with_files:
        files(tmp_path)
    kind, res = run_module(sglang_unit_snapshot, args(tmp_path, stop=True))
    assert kind == "exit" and not res["changed"] and not res["stopped"]
    assert [c[0] for c in s.calls] == ["show"]
    if not with_files:
        assert res["unit_content"] is None and res["env_content"] is None


def test_check_mode_predicts_the_stop_and_stops_nothing(run_module, systemctl, tmp_path):
    s = systemctl()
    files(tmp_path)
    kind, res = run_module(sglang_unit_snapshot, args(tmp_path, stop=True, _ansible_check_mode=True))
    assert kind == "exit" and res["changed"] and res["unit_content"] == UNIT
    assert [c[0] for c in s.calls] == ["show"]


def test_a_file_that_is_not_utf8_is_refused_rather_than_put_back_changed(run_module, systemctl, tmp_path):
    systemctl()
    files(tmp_path)
    (tmp_path / "sglang.env").write_bytes(b"HF_TOKEN=\xff\xfe\n")
    kind, res = run_module(sglang_unit_snapshot, args(tmp_path))
    assert kind == "fail" and "not UTF-8" in res["msg"] and "sglang.env" in res["msg"]
