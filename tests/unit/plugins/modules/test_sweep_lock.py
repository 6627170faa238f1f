"""sweep_lock: one sweep at a time per host; the holder is named; a lease that ran out, a refresh and a release."""

from __future__ import annotations

import json
import time

from ansible_collections.moesweep.sweep.plugins.action import sweep_lock as action
from ansible_collections.moesweep.sweep.plugins.modules import sweep_lock

A = {"controller": "laptop", "pid": 11, "sweep_id": "s1", "user": "alice"}
B = {"controller": "ci-runner", "pid": 22, "sweep_id": "s2", "user": "bob"}


def test_take_refuse_naming_the_holder_refresh_release(run_module, tmp_path):
    path = str(tmp_path / "sweep.lock")
    kind, r = run_module(sweep_lock, {"owner": A, "path": path})
    assert kind == "exit" and r["changed"] and json.load(open(path))["sweep_id"] == "s1"
    kind, r = run_module(sweep_lock, {"owner": B, "path": path})
    assert kind == "fail" and r["busy"] and "swept by laptop (user alice, process 11, sweep s1) since" in r["msg"]
    kind, r = run_module(sweep_lock, {"owner": A, "path": path, "lease": 60})
    assert kind == "exit" and not r["changed"] and r["held_by"]["expires"] > time.time() + 50
    kind, r = run_module(sweep_lock, {"owner": B, "path": path, "state": "released"})
    assert kind == "exit" and not r["changed"] and (tmp_path / "sweep.lock").exists()  # not B's to release
    kind, r = run_module(sweep_lock, {"owner": A, "path": path, "state": "released"})
    assert kind == "exit" and r["changed"] and not (tmp_path / "sweep.lock").exists()


def test_an_expired_lease_is_taken_over(run_module, tmp_path):
    path = tmp_path / "sweep.lock"
    path.write_text(json.dumps(dict(A, since=1.0, expires=2.0)))
    kind, r = run_module(sweep_lock, {"owner": B, "path": str(path)})
    assert kind == "exit" and json.loads(path.read_text())["sweep_id"] == "s2"


def test_check_mode_takes_nothing(run_module, tmp_path):
    path = tmp_path / "sweep.lock"
    kind, r = run_module(sweep_lock, {"owner": A, "path": str(path), "_ansible_check_mode": True})
    assert kind == "exit" and r["changed"] and not path.exists()


def test_a_holder_process_that_is_gone_is_detected():
    import os

    assert action.pid_alive(os.getpid())
    assert not action.pid_alive(2 ** 22 + 12345)
    assert not action.pid_alive(None)


def test_the_owner_is_its_id_not_its_hostname(run_module, tmp_path):
    """Two controllers both called localhost, one sweep id: the second is refused (re-probe #37 item 3)."""
    path = str(tmp_path / "sweep.lock")
    first = dict(A, controller="localhost", id="3b1f0c9e6a7d4e21")
    second = dict(A, controller="localhost", id="f00dfeed00112233")
    assert run_module(sweep_lock, {"owner": first, "path": path})[0] == "exit"
    kind, r = run_module(sweep_lock, {"owner": second, "path": path})
    assert kind == "fail" and r["busy"]
    kind, r = run_module(sweep_lock, {"owner": second, "path": path, "state": "released"})
    assert not r["changed"] and (tmp_path / "sweep.lock").exists()


def test_a_busy_lock_names_the_way_to_break_it_and_only_that_lock_breaks(run_module, tmp_path):
    path = str(tmp_path / "sweep.lock")
    holder = dict(A, id="3b1f0c9e6a7d4e21")
    run_module(sweep_lock, {"owner": holder, "path": path})
    kind, r = run_module(sweep_lock, {"owner": dict(B, id="aa"), "path": path})
    assert kind == "fail" and "-e sweep_lock_break=3b1f0c9e6a7d4e21" in r["msg"]
    assert "--break-lock 3b1f0c9e6a7d4e21" in r["msg"]
    # breaking another id (a lock taken since by a live sweep) takes nothing
    kind, r = run_module(sweep_lock, {"owner": dict(B, id="aa"), "path": path, "break_id": "0123456789abcdef"})
    assert kind == "fail" and r["busy"] and json.load(open(path))["id"] == "3b1f0c9e6a7d4e21"
    kind, r = run_module(sweep_lock, {"owner": dict(B, id="aa"), "path": path, "break_id": "3b1f0c9e6a7d4e21"})
    assert kind == "exit" and json.load(open(path))["id"] == "aa"
    assert r["broke"]["id"] == "3b1f0c9e6a7d4e21"
