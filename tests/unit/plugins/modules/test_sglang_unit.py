"""sglang_unit: the unit and its environment file written only when they differ, verified before they replace the
old ones, systemd reloaded when the unit changed or systemd runs an older copy, check mode writing nothing."""

from __future__ import annotations

import grp
import os
import pwd

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.modules import sglang_unit

UNIT = "[Unit]\nDescription=SGLang server (triton)\n\n[Service]\nType=exec\nExecStart=/bin/true\n"
ENV = 'HF_TOKEN="hf_secret"\nNCCL_P2P_DISABLE="1"\n'


class Systemd:
    """systemctl / systemd-analyze as run_command sees them: the calls made, the unit's show state."""

    def __init__(self, need_reload="no", unit_file_state="disabled", verify_output=""):
        self.calls = []
        self.props = {"ActiveState": "active", "SubState": "running", "LoadState": "loaded",
                      "NeedDaemonReload": need_reload, "UnitFileState": unit_file_state, "MainPID": "4242",
                      "InvocationID": "5c1bd2f6a9e04e8e9a0f6c1d7b3e2a10"}
        self.verify_output = verify_output
        self.verified = None

    def __call__(self, argv, environ_update=None, **_kw):
        self.calls.append(argv[1:])  # systemctl VERB ... / systemd-analyze verify ...
        if argv[0].endswith("systemd-analyze"):
            path = argv[-1].rsplit(":", 1)[0]
            with open(path) as fh:
                self.verified = fh.read()
            return 0, "", self.verify_output  # it exits 0 on warnings
        if argv[1] == "show":
            return 0, "".join(f"{k}={v}\n" for k, v in self.props.items()), ""
        if argv[1] == "daemon-reload":
            self.props["NeedDaemonReload"] = "no"
        elif argv[1] in ("enable", "disable"):
            self.props["UnitFileState"] = "enabled" if argv[1] == "enable" else "disabled"
        return 0, "", ""

    def verbs(self):
        return [c[0] for c in self.calls]


@pytest.fixture
def systemd(monkeypatch):
    box = {}

    def make(**kw):
        box["s"] = Systemd(**kw)
        monkeypatch.setattr(sglang_unit.AnsibleModule, "run_command", lambda self, argv, **k: box["s"](argv, **k))
        monkeypatch.setattr(sglang_unit.AnsibleModule, "get_bin_path",
                            lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name)
        return box["s"]

    return make


def args(tmp_path, **kw):
    out = {"name": "sglang.service", "unit_path": str(tmp_path / "system" / "sglang.service"),
           "unit_content": UNIT, "env_path": str(tmp_path / "etc" / "sglang.env"), "env_content": ENV,
           "enabled": False, "_ansible_tmpdir": str(tmp_path)}
    out.update(kw)
    return out


def test_first_call_writes_both_files_verifies_and_reloads(run_module, systemd, tmp_path):
    s = systemd(unit_file_state="")
    kind, res = run_module(sglang_unit, args(tmp_path))
    assert kind == "exit", res
    assert res["changed"] and res["config_changed"] and res["unit_changed"] and res["env_changed"]
    assert res["reloaded"] and not res["stale"] and res["enabled"] is False
    assert (tmp_path / "system" / "sglang.service").read_text() == UNIT
    assert (tmp_path / "etc" / "sglang.env").read_text() == ENV
    assert os.stat(tmp_path / "etc" / "sglang.env").st_mode & 0o7777 == 0o600
    assert os.stat(tmp_path / "system" / "sglang.service").st_mode & 0o7777 == 0o644
    assert s.verified == UNIT
    assert s.verbs()[:2] == ["show", "verify"] and "daemon-reload" in s.verbs()
    # a unit systemd has not loaded is not enabled: nothing to disable
    assert "disable" not in s.verbs()
    assert "hf_secret" not in repr(res)
    # no temporary file is left beside the unit, in the environment's directory or in the module's tmpdir
    assert sorted(os.listdir(tmp_path / "system")) == ["sglang.service"]
    assert sorted(os.listdir(tmp_path / "etc")) == ["sglang.env"]


def test_second_call_changes_nothing(run_module, systemd, tmp_path):
    systemd()
    run_module(sglang_unit, args(tmp_path))
    s = systemd()
    kind, res = run_module(sglang_unit, args(tmp_path))
    assert kind == "exit"
    assert not res["changed"] and not res["config_changed"] and not res["reloaded"]
    assert s.verbs() == ["show", "show"]  # no verify, no reload, no enable


def test_environment_change_alone_restarts_without_reload(run_module, systemd, tmp_path):
    systemd()
    run_module(sglang_unit, args(tmp_path))
    s = systemd()
    kind, res = run_module(sglang_unit, args(tmp_path, env_content=ENV + 'SGLANG_API_KEY="k"\n'))
    assert res["config_changed"] and res["env_changed"] and not res["unit_changed"] and not res["reloaded"]
    assert "daemon-reload" not in s.verbs() and "verify" not in s.verbs()


def test_stale_unit_is_reloaded_and_counts_as_changed(run_module, systemd, tmp_path):
    """A run that stopped between writing the unit and reloading systemd: the file is current, systemd's copy not."""
    systemd()
    run_module(sglang_unit, args(tmp_path))
    s = systemd(need_reload="yes")
    kind, res = run_module(sglang_unit, args(tmp_path))
    assert res["stale"] and res["config_changed"] and res["reloaded"] and not res["unit_changed"]
    assert "daemon-reload" in s.verbs() and res["status"]["NeedDaemonReload"] == "no"


def test_mode_repair_alone_is_no_configuration_change(run_module, systemd, tmp_path):
    systemd()
    run_module(sglang_unit, args(tmp_path))
    os.chmod(tmp_path / "etc" / "sglang.env", 0o644)
    systemd()
    kind, res = run_module(sglang_unit, args(tmp_path))
    assert res["changed"] and not res["config_changed"]
    assert os.stat(tmp_path / "etc" / "sglang.env").st_mode & 0o7777 == 0o600


def test_verify_failure_writes_nothing(run_module, systemd, tmp_path):
    # systemd-analyze's own words for an unknown key, exit status 0 (recorded: systemd 252.39-1~deb12u2, Debian 12)
    s = systemd(verify_output="/tmp/systemd-analyze-EkVxtm/sglang.service:6: Unknown key 'ExecStar' in section "
                              "[Service], ignoring.\n")
    kind, res = run_module(sglang_unit, args(tmp_path, unit_content=UNIT.replace("ExecStart", "ExecStar")))
    assert kind == "fail"
    assert "does not pass systemd-analyze verify" in res["msg"] and "nothing was written" in res["msg"]
    assert "sglang.service:6: Unknown key 'ExecStar' in section [Service]" in res["verify_output"]
    assert not (tmp_path / "system" / "sglang.service").exists() and not (tmp_path / "etc" / "sglang.env").exists()
    assert "daemon-reload" not in s.verbs()


def test_check_mode_reports_and_writes_nothing(run_module, systemd, tmp_path):
    s = systemd(unit_file_state="")
    kind, res = run_module(sglang_unit, args(tmp_path, _ansible_check_mode=True, _ansible_diff=True))
    assert kind == "exit"
    assert res["changed"] and res["config_changed"] and res["reloaded"]
    assert not (tmp_path / "system").exists() and not (tmp_path / "etc").exists()
    assert s.verbs() == ["show", "verify"]
    assert res["diff"]["after"] == UNIT and res["diff"]["before"] == ""
    assert "hf_secret" not in repr(res)


def test_enable_at_boot(run_module, systemd, tmp_path):
    s = systemd()
    kind, res = run_module(sglang_unit, args(tmp_path, enabled=True))
    assert res["enabled"] is True and "enable" in s.verbs()
    s = systemd(unit_file_state="enabled")
    kind, res = run_module(sglang_unit, args(tmp_path, enabled=True))
    assert not res["changed"] and "enable" not in s.verbs()


def test_env_path_without_content_is_refused(run_module, systemd, tmp_path):
    systemd()
    a = args(tmp_path)
    del a["env_content"]
    kind, res = run_module(sglang_unit, a)
    assert kind == "fail" and "env_content" in res["msg"]


@pytest.mark.parametrize("active, running", [("active", True), ("reloading", True), ("deactivating", False),
                                             ("failed", False)])
def test_running_says_whether_the_units_process_is_up(run_module, systemd, tmp_path, active, running):
    """The server role's judge-or-restart choice reads this field (module_utils/systemd.unit_running)."""
    s = systemd()
    s.props["ActiveState"] = active
    kind, res = run_module(sglang_unit, args(tmp_path))
    assert kind == "exit" and res["running"] is running and res["status"]["ActiveState"] == active


# ------------------------------------------------------------------------------------------ the secrets file
SECRET = 'api-key: "sk-unit-test-key"\n'


def me():
    return pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name


def secret_args(tmp_path, **kw):
    user, group = me()
    out = args(tmp_path, secret_config_path=str(tmp_path / "etc" / "sglang.secrets.yaml"),
               secret_config_content=SECRET, secret_config_owner=user, secret_config_group=group)
    out.update(kw)
    return out


def test_the_secrets_file_is_written_0600_for_the_service_user_and_counts_as_configuration(run_module, systemd,
                                                                                             tmp_path):
    systemd()
    kind, res = run_module(sglang_unit, secret_args(tmp_path))
    assert kind == "exit", res
    path = tmp_path / "etc" / "sglang.secrets.yaml"
    st = os.stat(path)
    assert path.read_text() == SECRET and st.st_mode & 0o7777 == 0o600
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())
    assert res["secret_config_changed"] and res["config_changed"]
    assert "sk-unit-test-key" not in repr(res)
    assert sorted(os.listdir(tmp_path / "etc")) == ["sglang.env", "sglang.secrets.yaml"]  # no temporary file left
    # the same again: nothing
    s = systemd()
    kind, res = run_module(sglang_unit, secret_args(tmp_path))
    assert not res["changed"] and not res["config_changed"] and not res["secret_config_changed"]
    assert s.verbs() == ["show", "show"]


def test_a_new_key_alone_restarts_without_reload(run_module, systemd, tmp_path):
    systemd()
    run_module(sglang_unit, secret_args(tmp_path))
    s = systemd()
    kind, res = run_module(sglang_unit, secret_args(tmp_path, secret_config_content='api-key: "sk-rotated"\n'))
    assert res["config_changed"] and res["secret_config_changed"] and not res["unit_changed"] and not res["env_changed"]
    assert "daemon-reload" not in s.verbs() and "verify" not in s.verbs()
    assert (tmp_path / "etc" / "sglang.secrets.yaml").read_text() == 'api-key: "sk-rotated"\n'


def test_no_key_removes_a_file_left_by_an_earlier_key(run_module, systemd, tmp_path):
    systemd()
    run_module(sglang_unit, secret_args(tmp_path))
    systemd()
    kind, res = run_module(sglang_unit, secret_args(tmp_path, secret_config_content=None))
    assert kind == "exit", res
    assert res["secret_config_changed"] and res["config_changed"]
    assert not (tmp_path / "etc" / "sglang.secrets.yaml").exists()
    systemd()
    kind, res = run_module(sglang_unit, secret_args(tmp_path, secret_config_content=None))
    assert not res["changed"] and not res["secret_config_changed"]


def test_the_secrets_file_in_check_mode_and_diff_is_predicted_never_shown(run_module, systemd, tmp_path):
    systemd()
    kind, res = run_module(sglang_unit, secret_args(tmp_path, _ansible_check_mode=True, _ansible_diff=True))
    assert kind == "exit" and res["secret_config_changed"] and res["config_changed"]
    assert not (tmp_path / "etc").exists()
    assert "sk-unit-test-key" not in repr(res) and "api-key" not in repr(res["diff"])
    # a file to remove, in check mode: predicted, left
    systemd()
    run_module(sglang_unit, secret_args(tmp_path))
    systemd()
    kind, res = run_module(sglang_unit, secret_args(tmp_path, secret_config_content=None, _ansible_check_mode=True))
    assert res["secret_config_changed"] and (tmp_path / "etc" / "sglang.secrets.yaml").exists()


def test_an_owner_or_mode_repair_of_the_secrets_file_is_no_configuration_change(run_module, systemd, tmp_path):
    systemd()
    run_module(sglang_unit, secret_args(tmp_path))
    os.chmod(tmp_path / "etc" / "sglang.secrets.yaml", 0o644)
    systemd()
    kind, res = run_module(sglang_unit, secret_args(tmp_path))
    assert res["changed"] and not res["config_changed"] and not res["secret_config_changed"]
    assert os.stat(tmp_path / "etc" / "sglang.secrets.yaml").st_mode & 0o7777 == 0o600


@pytest.mark.skipif(os.getuid() != 0, reason="the file is given to root, which only root can do")
def test_the_secrets_file_owner_defaults_to_root(run_module, systemd, tmp_path):
    systemd()
    a = secret_args(tmp_path)
    del a["secret_config_owner"], a["secret_config_group"]
    kind, res = run_module(sglang_unit, a)
    assert kind == "exit", res
    st = os.stat(tmp_path / "etc" / "sglang.secrets.yaml")
    assert (st.st_uid, st.st_gid) == (0, 0)


def test_a_secrets_file_owner_that_does_not_exist(run_module, systemd, tmp_path):
    systemd()
    kind, res = run_module(sglang_unit, secret_args(tmp_path, secret_config_owner="moesweep-no-such-user"))
    assert kind == "fail" and "moesweep-no-such-user" in res["msg"] and "does not exist" in res["msg"]
    assert not (tmp_path / "etc").exists()
    # in check mode the account is only predicted: a change, not a failure
    systemd()
    kind, res = run_module(sglang_unit, secret_args(tmp_path, secret_config_owner="moesweep-no-such-user",
                                                    _ansible_check_mode=True))
    assert kind == "exit" and res["secret_config_changed"]


def test_secret_content_without_its_path_is_refused(run_module, systemd, tmp_path):
    systemd()
    a = secret_args(tmp_path)
    del a["secret_config_path"]
    kind, res = run_module(sglang_unit, a)
    assert kind == "fail" and "secret_config_path" in res["msg"]


def test_the_secret_contents_are_no_log(monkeypatch):
    """Ansible masks no_log values in every result, log and diff (module_utils basic remove_values)."""
    seen = {}

    class Stop(Exception):
        pass

    def init(self, argument_spec, **_kw):
        seen.update(argument_spec)
        raise Stop

    monkeypatch.setattr(sglang_unit.AnsibleModule, "__init__", init)
    with pytest.raises(Stop):
        sglang_unit.main()
    assert seen["secret_config_content"].get("no_log") and seen["env_content"].get("no_log")
