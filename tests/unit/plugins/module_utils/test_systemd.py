"""module_utils/systemd.py: unit names, the one ``systemctl show`` reader and what its states mean, on real
``systemctl show`` output recorded on a simulated host (tests/fixtures/systemctl/SOURCES.md)."""

from __future__ import annotations

import pytest
from ansible_collections.moesweep.sweep.plugins.module_utils.systemd import (
    Systemctl,
    parse_show,
    show_argv,
    unit_gone,
    unit_running,
    unit_stopping,
    validate_unit,
)
from helpers.paths import FIXTURES as FIXTURES_ROOT

FIXTURES = FIXTURES_ROOT / "systemctl"


def recorded(name):
    return (FIXTURES / name).read_text()


class RunCommand:
    """AnsibleModule.run_command as systemctl answers it: one scripted (rc, out, err) per call, argv kept."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def __call__(self, argv, environ_update=None):
        self.calls.append((list(argv), dict(environ_update or {})))
        return self.answers.pop(0)


def test_parse_show_reads_a_running_unit_in_systemctls_own_order():
    props = parse_show(recorded("show-running.txt"))
    assert props["ActiveState"] == "active" and props["SubState"] == "running"
    assert props["MainPID"] == "54" and props["InvocationID"] == "c81f62ac82ee4567b43cef59b72e5db7"
    assert props["UnitFileState"] == "transient" and props["NeedDaemonReload"] == "no"
    assert len(props) == 11


def test_parse_show_keeps_empty_values_of_an_unknown_unit():
    props = parse_show(recorded("show-not-found.txt"))
    assert props["LoadState"] == "not-found" and props["ActiveState"] == "inactive"
    assert props["InvocationID"] == "" and props["UnitFileState"] == ""


def test_parse_show_small_cases():
    assert parse_show("ActiveState=failed\nExecMainStatus=9\n") == {"ActiveState": "failed", "ExecMainStatus": "9"}
    assert parse_show("") == {}
    assert parse_show("Environment=A=1 B=2\n") == {"Environment": "A=1 B=2"}  # split at the first "=" only


@pytest.mark.parametrize("fixture, running, stopping, gone", [
    ("show-running.txt", True, False, False),
    ("show-deactivating.txt", False, True, True),
    ("show-killed.txt", False, False, True),
    ("show-exited-3.txt", False, False, True),
    ("show-not-found.txt", False, False, True),
])
def test_one_definition_of_running_stopping_and_gone_on_recorded_states(fixture, running, stopping, gone):
    props = parse_show(recorded(fixture))
    assert (unit_running(props), unit_stopping(props), unit_gone(props)) == (running, stopping, gone)


@pytest.mark.parametrize("state", ["active", "activating", "reloading"])
def test_a_unit_coming_up_or_reloading_is_running(state):
    assert unit_running({"ActiveState": state}) and not unit_gone({"ActiveState": state})


def test_nothing_known_is_neither_running_nor_gone():
    assert not unit_running({}) and not unit_stopping({}) and not unit_gone({})


def test_killed_and_exited_units_keep_how_their_main_process_ended():
    killed, exited = parse_show(recorded("show-killed.txt")), parse_show(recorded("show-exited-3.txt"))
    assert (killed["ExecMainCode"], killed["ExecMainStatus"]) == ("2", "9")  # CLD_KILLED by SIGKILL
    assert (exited["ExecMainCode"], exited["ExecMainStatus"]) == ("1", "3")  # CLD_EXITED with status 3


def test_validate_unit():
    assert validate_unit("sglang") == ("sglang.service", None)
    assert validate_unit("sglang@glm5.service") == ("sglang@glm5.service", None)
    for bad in ("sglang; rm -rf /", "sg lang", "$(id)", "a|b", "-x", "", "x" * 300, "sglang.timer"):
        assert validate_unit(bad)[1], bad


def test_show_builds_the_one_command_line_with_the_callers_properties_in_the_c_locale():
    run = RunCommand((0, recorded("show-limits.txt"), ""))
    props, failed = Systemctl(run, "/usr/bin/systemctl").show(
        "sglang.service", ("LoadState", "MainPID", "LimitMEMLOCK", "LimitNOFILE"))
    assert failed is None
    assert props == {"MainPID": "54", "LimitNOFILE": "524288", "LimitMEMLOCK": "8388608", "LoadState": "loaded"}
    assert run.calls == [(["/usr/bin/systemctl", "show", "sglang.service", "-p",
                           "LoadState,MainPID,LimitMEMLOCK,LimitNOFILE"], {"LC_ALL": "C"})]
    assert show_argv("systemctl", "u.service", ("ActiveState",)) == ["systemctl", "show", "u.service", "-p",
                                                                      "ActiveState"]


def test_a_failed_show_reads_nothing_and_says_why():
    run = RunCommand((1, "", "Failed to connect to bus: Host is down\n"))
    props, failed = Systemctl(run, "systemctl").show("sglang.service", ("ActiveState",))
    assert props == {}
    assert failed == "systemctl show sglang.service failed (rc 1): Failed to connect to bus: Host is down"


def test_run_acts_and_names_the_command_that_failed():
    run = RunCommand((0, "", ""), (5, "", "Failed to start sglang.service: Unit sglang.service not found.\n"))
    systemd = Systemctl(run, "systemctl")
    assert systemd.run("stop", "--no-block", "sglang.service") == (0, "", "", None)
    rc, _out, _err, failed = systemd.run("start", "sglang.service")
    assert rc == 5 and failed == ("systemctl start sglang.service failed (rc 5): Failed to start sglang.service: "
                                  "Unit sglang.service not found.")
    assert [argv for argv, _env in run.calls] == [["systemctl", "stop", "--no-block", "sglang.service"],
                                                  ["systemctl", "start", "sglang.service"]]
    assert all(env == {"LC_ALL": "C"} for _argv, env in run.calls)


def test_start_starts_only_a_unit_that_does_not_run_and_reads_its_new_run():
    props = ("ActiveState", "InvocationID")
    # a killed unit: started, then its new run read
    run = RunCommand((0, recorded("show-killed.txt"), ""), (0, "", ""), (0, recorded("show-running.txt"), ""))
    started, after, rc, failed = Systemctl(run, "systemctl").start("sglang.service", props)
    assert (started, rc, failed) == (True, 0, None)
    assert after["InvocationID"] == "c81f62ac82ee4567b43cef59b72e5db7"
    assert [argv[1] for argv, _env in run.calls] == ["show", "start", "show"]
    # a running unit: left alone
    run = RunCommand((0, recorded("show-running.txt"), ""))
    started, after, _rc, failed = Systemctl(run, "systemctl").start("sglang.service", props)
    assert started is False and failed is None and after["InvocationID"] == "c81f62ac82ee4567b43cef59b72e5db7"
    assert [argv[1] for argv, _env in run.calls] == ["show"]
    # check mode: would start, starts nothing
    run = RunCommand((0, recorded("show-killed.txt"), ""))
    assert Systemctl(run, "systemctl").start("sglang.service", props, check_mode=True)[0] is True
    assert [argv[1] for argv, _env in run.calls] == ["show"]
    # a start that fails says why, with the unit's state after it
    run = RunCommand((0, recorded("show-killed.txt"), ""), (5, "", "Unit sglang.service not found.\n"),
                     (0, recorded("show-killed.txt"), ""))
    started, after, rc, failed = Systemctl(run, "systemctl").start("sglang.service", props)
    assert started is False and rc == 5 and "systemctl start sglang.service failed (rc 5)" in failed
    assert after["ActiveState"] == "failed"
