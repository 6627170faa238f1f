"""plugin_utils/schedule.py: when a sweep stops a server early (stop_early) and when the restore keeps the one that
runs (keep_running), before the sweep, when a point ends and at the restore."""

from __future__ import annotations

import pytest
from ansible_collections.moesweep.sweep.plugins.plugin_utils.schedule import server_schedule


def _rec(point, status, tok=None, ttft=10.0, host="h", config="c"):
    levels = [{"concurrency": 8, "ok": tok is not None, "figures": {"output_throughput": tok, "p99_ttft_ms": ttft}}]
    return {"kind": "point", "host": host, "point": point, "status": status, "config_hash": config,
            "benchmark": {"levels": levels}}


def after(sweep, point, recs, stop_requested=False, **kw):
    """(stop_early, reason) when ``point`` ends."""
    plan = server_schedule(sweep, "h", recs, "point", point=point, stop_requested=stop_requested, **kw)
    assert plan["keep_running"] is False
    return plan["stop_early"], plan["reason"]


def before(sweep, recs, stop_requested=False, **kw):
    """(stop_early, reason) for the server that runs before the sweep."""
    plan = server_schedule(sweep, "h", recs, "sweep", stop_requested=stop_requested, **kw)
    assert plan["keep_running"] is False
    return plan["stop_early"], plan["reason"]


def restore(choice, running_point, nodes=None, running_stopped=False):
    plan = server_schedule({"nodes": nodes}, "h", [], "restore", choice=choice, running_point=running_point,
                           running_stopped=running_stopped)
    return plan["stop_early"], plan["keep_running"]


def test_a_point_stops_its_server_early_only_when_the_next_point_surely_starts_its_own():
    sweep = {"points": ["a", "b", "c"], "starts_server": ["a", "c"], "restore": "best", "rerun": False}
    stop, why = after(sweep, "b", [])
    assert stop and "c starts its own server" in why
    # the next point is refused by the preflight (it starts nothing): the host keeps serving meanwhile
    assert after(sweep, "a", []) == (False, "the preflight refuses the next point b (it would not start a server)")
    assert not after(sweep, "c", [])[0]  # the last point, nothing passed: the restore decides
    assert not after(sweep, "x", [])[0]  # not this host's point
    assert "asked to stop" in after(sweep, "b", [], True)[1]
    assert "node group" in after(dict(sweep, nodes={"group": "g"}), "b", [])[1]
    assert "restore=none" in after(dict(sweep, restore="none"), "b", [])[1]
    # resume may skip the next point: a passing record of it on this host (another host's does not count)
    assert "resume may skip it" in after(sweep, "b", [_rec("c", "passed", 10.0)])[1]
    assert after(sweep, "b", [_rec("c", "passed", 10.0, host="x")])[0]
    assert after(sweep, "b", [_rec("c", "crashed")])[0]
    assert after(dict(sweep, rerun=True), "b", [_rec("c", "passed", 10.0)])[0]


def test_the_guards_of_the_caller_check_mode_and_an_unwritable_results_directory():
    sweep = {"points": ["a", "b", "c"], "starts_server": ["a", "c"], "restore": "best", "rerun": False}
    assert after(sweep, "b", [], check_mode=True) == (False, "check mode: nothing is stopped")
    assert after(sweep, "b", [], writable=False) == (False, "the results directory is not writable: the sweep stops "
                                                            "here")
    assert before(dict(sweep, starts_server=["a"]), [], check_mode=True) == (False, "check mode: nothing is stopped")
    # a decision that stops nothing keeps its own reason
    assert after(sweep, "a", [], check_mode=True)[1].startswith("the preflight refuses the next point b")


def test_the_last_point_stops_its_server_early_only_when_the_restore_puts_back_another():
    sweep = {"points": ["a", "b", "c"], "starts_server": ["a", "b", "c"], "restore": "best", "rerun": False,
             "reference_concurrency": 8}
    recs = [_rec("a", "passed", 150.0), _rec("b", "passed", 100.0)]
    stop, why = after(sweep, "c", recs + [_rec("c", "passed", 120.0)])
    assert stop and "the restore puts back a" in why
    # the last point is the best: the restore keeps it running
    assert after(sweep, "c", recs + [_rec("c", "passed", 200.0)]) == (
        False, "c is the best point: the restore keeps it running")
    # nothing passed: the restore may put back what ran before the sweep, or leave the host as it is
    assert "no point passed" in after(sweep, "c", [_rec("c", "crashed")])[1]
    # another host's records do not count
    assert not after(sweep, "c", [_rec("a", "passed", 150.0, host="x"), _rec("c", "passed", 1.0)])[0]
    # a point that is not the last is decided by the next point, not by the restore
    assert after(sweep, "b", recs)[1].startswith("the next point c starts its own server")
    assert "restore=previous" in after(dict(sweep, restore="previous"), "c", recs)[1]
    assert "restore=none" in after(dict(sweep, restore="none"), "c", recs)[1]
    assert "asked to stop" in after(sweep, "c", recs, True)[1]
    assert "node group" in after(dict(sweep, nodes={"group": "g"}), "c", recs)[1]
    # what the restore then does: neither stop it again nor keep it
    assert restore({"action": "point", "point": "a"}, "c", running_stopped=True) == (False, False)
    assert restore({"action": "point", "point": "c"}, "c", running_stopped=True) == (False, False)


def test_the_restore_stops_the_running_server_first_only_when_it_puts_back_another_point():
    assert restore({"action": "point", "point": "a"}, "c")[0]
    assert not restore({"action": "point", "point": "c"}, "c")[0]
    assert not restore({"action": "point", "point": "a"}, "")[0]
    assert not restore({"action": "previous", "point": None}, "c")[0]
    assert not restore({"action": "none", "point": None}, "c")[0]
    assert not restore({"action": "point", "point": "a"}, "c", nodes={"group": "g"})[0]


def test_the_restore_only_judges_the_server_when_the_best_point_is_the_one_running():
    assert restore({"action": "point", "point": "c"}, "c")[1]
    assert not restore({"action": "point", "point": "a"}, "c")[1]
    assert not restore({"action": "point", "point": "c"}, "")[1]
    assert not restore({"action": "previous", "point": None}, "c")[1]
    assert not restore({"action": "none", "point": None}, "c")[1]
    # a node group's ranks are judged together by the server role
    assert not restore({"action": "point", "point": "c"}, "c", nodes={"group": "g"})[1]


def test_the_restore_never_both_stops_and_keeps_and_says_why():
    for choice in ({"action": "point", "point": "a"}, {"action": "point", "point": "c"}, {"action": "none"}):
        for running_point in ("", "c"):
            for running_stopped in (False, True):
                assert restore(choice, running_point, running_stopped=running_stopped) != (True, True)
    plan = server_schedule({}, "h", [], "restore", choice={"action": "point", "point": "a"}, running_point="c")
    assert plan["reason"] == "the server of c is stopped first (the restore starts another)"
    plan = server_schedule({}, "h", [], "restore", choice={"action": "point", "point": "a"}, running_point="c",
                           running_stopped=True)
    assert plan["reason"] == "the server of c was stopped when it ended"


def test_the_server_before_the_sweep_is_stopped_at_once_only_when_the_first_point_starts_its_own():
    sweep = {"points": ["a", "b"], "starts_server": ["a"], "restore": "best", "rerun": False}
    stop, why = before(sweep, [])
    assert stop and why == ("the next point a starts its own server: the server that runs before the sweep is "
                            "stopped now, its drain overlapping")
    # the first point is refused: the host keeps serving while the sweep goes on to the next point
    assert not before(dict(sweep, starts_server=["b"]), [])[0]
    assert not before(dict(sweep, points=[]), [])[0]
    assert "resume may skip it" in before(sweep, [_rec("a", "passed", 10.0)])[1]
    assert "restore=none" in before(dict(sweep, restore="none"), [])[1]
    assert "node group" in before(dict(sweep, nodes={"group": "g"}), [])[1]
    assert "asked to stop" in before(sweep, [], True)[1]


def test_an_unknown_step_is_refused():
    with pytest.raises(ValueError, match="step must be one of sweep, point, restore"):
        server_schedule({}, "h", [], "later")


def test_a_next_point_that_runs_the_kernels_of_one_that_passed_is_not_started_so_nothing_is_stopped_for_it():
    sweep = {"points": ["a", "b", "c"], "starts_server": ["a", "b", "c"], "restore": "best", "rerun": False,
             "equivalent": {"c": "a"}}
    stop, why = after(sweep, "b", [_rec("a", "passed", 10.0)])
    assert not stop and "c runs the kernels of a, which passed" in why
    assert after(sweep, "b", [_rec("a", "crashed")])[0]  # a did not pass: c is measured, it starts its own
    assert after(dict(sweep, measure_equivalent=True), "b", [_rec("a", "passed", 10.0)])[0]
    # a rerun counts only what this run measured
    old = dict(_rec("a", "passed", 10.0), finished="2026-12-06T05:00:00+00:00")
    assert after(dict(sweep, rerun=True, created="2026-12-06T06:00:00+00:00"), "b", [old])[0]
