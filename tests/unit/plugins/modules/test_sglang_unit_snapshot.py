"""sglang_unit_snapshot: the unit file, its environment file and the unit's state read in one call, exactly as they
are; it changes nothing."""

from __future__ import annotations

import grp
import os
import pwd

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
    assert not res["changed"] and "stopped" not in res and [c[0] for c in s.calls] == ["show"]


@pytest.mark.parametrize("active", ["active", "activating", "reloading"])  # systemd.unit_running
def test_a_running_unit_reads_active_and_is_left_running(run_module, systemctl, tmp_path, active):
    """The sweep stops it (the server role's stop entry point) when its first point starts its own, and the unit is
    active with a unit file; this read only says so."""
    s = systemctl(active=active)
    files(tmp_path)
    kind, res = run_module(sglang_unit_snapshot, args(tmp_path))
    assert kind == "exit" and not res["changed"] and res["active"] and res["unit_content"] == UNIT
    assert [c[0] for c in s.calls] == ["show"]


@pytest.mark.parametrize("active, with_files", [("inactive", True), ("failed", True), ("deactivating", True),
                                                ("active", False)])
def test_a_unit_that_does_not_run_or_has_no_unit_file_reads_so(run_module, systemctl, tmp_path, active,
                                                                 with_files):
    s = systemctl(active=active)
    if with_files:
        files(tmp_path)
    kind, res = run_module(sglang_unit_snapshot, args(tmp_path))
    assert kind == "exit" and not res["changed"]
    assert res["active"] is (active == "active")
    assert [c[0] for c in s.calls] == ["show"]
    if not with_files:
        assert res["unit_content"] is None and res["env_content"] is None


def test_check_mode_reads_the_same_and_changes_nothing(run_module, systemctl, tmp_path):
    s = systemctl()
    files(tmp_path)
    kind, res = run_module(sglang_unit_snapshot, args(tmp_path, _ansible_check_mode=True))
    assert kind == "exit" and not res["changed"] and res["unit_content"] == UNIT and res["active"]
    assert [c[0] for c in s.calls] == ["show"]


def test_it_has_no_option_that_stops_the_unit(run_module, systemctl, tmp_path):
    s = systemctl()
    kind, res = run_module(sglang_unit_snapshot, args(tmp_path, stop=True))
    assert kind == "fail" and "stop" in res["msg"] and s.calls == []


def test_a_file_that_is_not_utf8_is_refused_rather_than_put_back_changed(run_module, systemctl, tmp_path):
    systemctl()
    files(tmp_path)
    (tmp_path / "sglang.env").write_bytes(b"HF_TOKEN=\xff\xfe\n")
    kind, res = run_module(sglang_unit_snapshot, args(tmp_path))
    assert kind == "fail" and "not UTF-8" in res["msg"] and "sglang.env" in res["msg"]


def test_the_secrets_file_is_read_with_its_owner_so_the_restore_puts_it_back_as_it_was(run_module, systemctl,
                                                                                     tmp_path):
    systemctl()
    files(tmp_path)
    secret = tmp_path / "sglang.secrets.yaml"
    secret.write_text('api-key: "sk-before"\n')
    kind, res = run_module(sglang_unit_snapshot, args(tmp_path, secret_config_path=str(secret)))
    assert kind == "exit", res
    assert res["secret_config_content"] == 'api-key: "sk-before"\n'
    assert res["secret_config_owner"] == {"owner": pwd.getpwuid(os.getuid()).pw_name,
                                          "group": grp.getgrgid(os.getgid()).gr_name}
    # none there, or none asked for: null (the restore removes a file the sweep left)
    secret.unlink()
    kind, res = run_module(sglang_unit_snapshot, args(tmp_path, secret_config_path=str(secret)))
    assert res["secret_config_content"] is None and res["secret_config_owner"] is None
    kind, res = run_module(sglang_unit_snapshot, args(tmp_path))
    assert res["secret_config_content"] is None


def test_an_owner_the_host_has_no_name_for_reads_as_its_id(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_text("x")
    monkeypatch.setattr(sglang_unit_snapshot.pwd, "getpwuid", lambda uid: (_ for _ in ()).throw(KeyError(uid)))
    monkeypatch.setattr(sglang_unit_snapshot.grp, "getgrgid", lambda gid: (_ for _ in ()).throw(KeyError(gid)))
    assert sglang_unit_snapshot.owner_of(str(path)) == {"owner": str(os.getuid()), "group": str(os.getgid())}
    assert sglang_unit_snapshot.owner_of(str(tmp_path / "missing")) is None
