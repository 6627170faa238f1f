"""The results callback, the one writer: records appended atomically, artifacts beside them, 0600 / 0700,
in-flight markers turned into interrupted records (at exit, and by the next run after a SIGKILL)."""

from __future__ import annotations

import json
import os
import stat
from types import SimpleNamespace

import pytest
from ansible_collections.moesweep.sweep.plugins.callback import results
from ansible_collections.moesweep.sweep.plugins.plugin_utils import records


class Display:
    verbosity = 0

    def __init__(self):
        self.lines = []

    def display(self, text, **kw):
        self.lines.append(text)

    warning = error = display


def make_result(res, host="h1", check_mode=False):
    return SimpleNamespace(result=res, host=SimpleNamespace(get_name=lambda: host), task=SimpleNamespace(
        check_mode=check_mode))


@pytest.fixture
def cb(monkeypatch):
    monkeypatch.setattr(results.atexit, "register", lambda fn: None)
    plugin = results.CallbackModule(display=Display())
    plugin.get_option = lambda name: True
    return plugin


def plan(tmp_path):
    return {"sweep_id": "s1", "dir": str(tmp_path / "results" / "s1"), "points": ["a"], "reference_concurrency": 8}


def test_record_and_artifacts_are_written_private(cb, tmp_path):
    sweep = plan(tmp_path)
    cb.v2_runner_on_ok(make_result({"moesweep_sweep": sweep, "moesweep_event": "point_started", "point": "a",
                                    "started": "t0"}))
    marker = tmp_path / "results" / "s1" / records.INFLIGHT_DIR / "h1__a.json"
    assert marker.exists()
    record = {"kind": "point", "host": "h1", "point": "a", "status": "passed", "facts": {"sm": "sm120"},
              "smoke": {"answers": [{"text": "hi"}]}}
    cb.v2_runner_on_ok(make_result({"moesweep_sweep": sweep, "moesweep_event": "record", "moesweep_record": record,
                                    "artifacts": {"unit.service": "[Unit]\n"}}))
    d = tmp_path / "results" / "s1"
    assert records.read_points(str(d / "points.jsonl")) == [record]
    assert (d / "h1" / "a" / "unit.service").read_text() == "[Unit]\n"
    assert json.loads((d / "h1" / "a" / "smoke.json").read_text())["answers"][0]["text"] == "hi"
    assert json.loads((d / "hosts" / "h1.json").read_text())["facts"] == {"sm": "sm120"}
    assert not marker.exists()
    for root, dirs, files in os.walk(tmp_path / "results"):
        for name in dirs:
            assert stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode) == 0o700, name
        for name in files:
            assert stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode) == 0o600, name


def test_check_mode_writes_nothing(cb, tmp_path):
    sweep = plan(tmp_path)
    cb.v2_runner_on_ok(make_result({"moesweep_sweep": sweep, "moesweep_event": "point_started", "point": "a"},
                                   check_mode=True))
    assert not (tmp_path / "results").exists()


def test_interrupted_at_exit_and_recovered_after_a_kill(cb, tmp_path, monkeypatch):
    sweep = plan(tmp_path)
    cb.v2_runner_on_ok(make_result({"moesweep_sweep": sweep, "moesweep_event": "point_started", "point": "a",
                                    "started": "t0"}))
    cb._at_exit()  # Ctrl-C: ansible-playbook exits without v2_playbook_on_stats
    recs = records.read_points(os.path.join(sweep["dir"], "points.jsonl"))
    assert [(r["point"], r["status"]) for r in recs] == [("a", "interrupted")]
    # SIGKILL: the marker stays; the next run's callback records the point when it sees the sweep again
    cb.v2_runner_on_ok(make_result({"moesweep_sweep": sweep, "moesweep_event": "point_started", "point": "b",
                                    "started": "t1"}, host="h2"))
    monkeypatch.setattr(results.atexit, "register", lambda fn: None)
    fresh = results.CallbackModule(display=Display())
    fresh.get_option = lambda name: True
    fresh.v2_runner_on_ok(make_result({"moesweep_sweep": sweep, "changed": False}))
    recs = records.read_points(os.path.join(sweep["dir"], "points.jsonl"))
    assert [(r["host"], r["point"], r["status"]) for r in recs][-1] == ("h2", "b", "interrupted")
    assert not os.listdir(os.path.join(sweep["dir"], records.INFLIGHT_DIR))


def test_unreachable_during_a_point(cb, tmp_path):
    sweep = plan(tmp_path)
    cb.v2_runner_on_ok(make_result({"moesweep_sweep": sweep, "moesweep_event": "point_started", "point": "a"}))
    cb.v2_runner_on_unreachable(make_result({"msg": "ssh: connect to host 10.213.1.2 port 22: No route to host"}))
    rec = records.read_points(os.path.join(sweep["dir"], "points.jsonl"))[-1]
    assert rec["status"] == "unreachable" and "No route to host" in rec["failed_msg"]


def test_append_drops_a_torn_line_and_never_tears(tmp_path):
    path = tmp_path / "d" / "points.jsonl"
    path.parent.mkdir()
    path.write_bytes(b'{"a": 1}\n{"b": ')
    results.append_record(str(path), {"c": 3})
    assert path.read_bytes() == b'{"a": 1}\n{"c": 3}\n'


def test_a_write_that_fails_is_an_error_naming_the_record(cb, tmp_path, monkeypatch):
    """Even root cannot write into a path whose directory is a file: the error names the record and where it is kept
    (the sweep's directory of kept records, 0700 / 0600); the callback does not raise (ansible would only warn), and
    the next run that can write puts the record into points.jsonl (#37 item 1)."""
    monkeypatch.setenv(records.UNWRITTEN_ENV, str(tmp_path / "kept"))
    sweep = plan(tmp_path)
    os.makedirs(os.path.dirname(sweep["dir"]))
    with open(sweep["dir"], "w") as fh:
        fh.write("not a directory")
    cb.v2_runner_on_ok(make_result({"moesweep_sweep": sweep, "moesweep_event": "record",
                                    "moesweep_record": {"sweep_id": "s1", "host": "h1", "point": "a",
                                                        "kind": "point", "status": "passed"}}))
    assert cb.write_errors and sweep["dir"] in cb.write_errors[0]
    kept = [line.split("kept ", 1)[1] for line in cb._display.lines if "kept " in line]
    assert kept and kept[0].startswith(str(tmp_path / "kept" / "s1")), kept
    assert json.loads(open(kept[0]).read())["point"] == "a"
    assert stat.S_IMODE(os.stat(kept[0]).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(kept[0])).st_mode) == 0o700
    assert [r["point"] for _, r in records.kept_records("s1")] == ["a"]
    # the directory is fixed; the next run of the sweep writes the kept record first
    os.unlink(sweep["dir"])
    fresh = results.CallbackModule(display=Display())
    fresh.get_option = lambda name: True
    fresh.v2_runner_on_ok(make_result({"moesweep_sweep": sweep, "changed": False}))
    assert [r["point"] for r in records.read_points(os.path.join(sweep["dir"], "points.jsonl"))] == ["a"]
    assert records.kept_records("s1") == []


def test_a_marker_whose_point_was_recorded_is_no_interrupted_point(cb, tmp_path):
    """The marker could not be removed (the directory went read-only) though the point's record was kept: the next
    run does not add a false interrupted record of that point."""
    sweep = plan(tmp_path)
    marker = tmp_path / "results" / "s1" / records.INFLIGHT_DIR / "h1__a.json"
    marker.parent.mkdir(parents=True)
    marker.write_text(json.dumps({"host": "h1", "point": "a", "started": "t0"}))
    (tmp_path / "results" / "s1" / "points.jsonl").write_text(json.dumps(
        {"kind": "point", "host": "h1", "point": "a", "started": "t0", "status": "passed"}) + "\n")
    cb.v2_runner_on_ok(make_result({"moesweep_sweep": sweep, "changed": False}))
    assert [r["status"] for r in records.read_points(os.path.join(sweep["dir"], "points.jsonl"))] == ["passed"]
    assert not marker.exists()


def test_a_skipped_point_writes_its_record_again(cb, tmp_path):
    sweep = plan(tmp_path)
    rec = {"sweep_id": "s1", "kind": "point", "host": "h1", "point": "a", "status": "passed", "resumed": "t"}
    cb.v2_runner_on_ok(make_result({"moesweep_sweep": sweep, "moesweep_event": "resume", "skip": True, "point": "a",
                                    "moesweep_record": rec, "msg": "skipped"}))
    assert records.read_points(os.path.join(sweep["dir"], "points.jsonl")) == [rec]


def test_an_interconnect_measurement_goes_to_its_own_file(cb, tmp_path):
    sweep = plan(tmp_path)
    record = {"kind": "interconnect", "host": "h1", "key": "k1", "ranks": 8, "rows": []}
    cb.v2_runner_on_ok(make_result({"moesweep_sweep": sweep, "moesweep_event": "interconnect",
                                    "moesweep_record": record, "msg": "h1: all-reduce measured"}))
    path = os.path.join(sweep["dir"], records.INTERCONNECT_FILE)
    assert records.read_interconnect(path) == [record]
    assert records.read_points(os.path.join(sweep["dir"], records.POINTS_FILE)) == []


def test_append_keeps_a_whole_last_record_without_newline(tmp_path):
    """Only a torn line is dropped: a last record that parses is kept, its newline added (#37 item 6)."""
    path = tmp_path / "d" / "points.jsonl"
    path.parent.mkdir()
    path.write_bytes(b'{"a": 1}\n{"b": 2}')
    results.append_record(str(path), {"c": 3})
    assert path.read_bytes() == b'{"a": 1}\n{"b": 2}\n{"c": 3}\n'


def test_records_the_callback_writes_itself_say_whether_the_host_is_simulated(cb, tmp_path):
    """#37: an interrupted or unreachable point of a simulated host is filed as simulated, not as a real GPU host."""
    sweep = plan(tmp_path)
    cb.v2_runner_on_ok(make_result({"moesweep_sweep": sweep, "moesweep_event": "point_started", "point": "a",
                                    "started": "t0", "simulated": True}))
    cb.v2_runner_on_unreachable(make_result({"msg": "gone"}))
    cb.v2_runner_on_ok(make_result({"moesweep_sweep": sweep, "moesweep_event": "point_started", "point": "b",
                                    "started": "t1", "simulated": True}, host="h2"))
    cb._at_exit()
    recs = records.read_points(os.path.join(sweep["dir"], "points.jsonl"))
    assert [(r["status"], r["simulated"]) for r in recs] == [("unreachable", True), ("interrupted", True)]
