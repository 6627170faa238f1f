"""Which configuration the restore leaves a host on, and why it says so."""

from __future__ import annotations

from ansible_collections.moesweep.sweep.plugins.plugin_utils import records, restore
from helpers.point_records import point_record as _rec


def test_restore_choice():
    recs = [_rec("a", "passed", 100.0), _rec("b", "passed", 150.0, ttft=99), _rec("c", "passed", 150.0, ttft=20),
            _rec("d", "crashed")]
    best = restore.choose_restore(recs, "h", "best", 8, {"unit": True}, ["a", "b", "c", "d"])
    assert best["action"] == "point" and best["point"] == "c" and "150.0 output tok/s" in best["reason"]
    assert restore.choose_restore(recs, "h", "previous", 8, {"unit": True}, None)["action"] == "previous"
    nothing = [_rec("d", "crashed")]
    fallback = restore.choose_restore(nothing, "h", "best", 8, {"unit": True, "active": True}, None)
    assert fallback["action"] == "previous" and "no point passed" in fallback["reason"]
    assert restore.choose_restore(nothing, "h", "best", 8, {"unit": False}, None)["action"] == "none"
    assert restore.choose_restore(recs, "h", "none", 8, {}, None)["action"] == "none"


def test_a_host_the_spread_gave_no_point_is_left_alone():
    choice = restore.choose_restore([], "h5", "best", 8, {"unit": True, "active": True}, [])
    assert choice["action"] == "none" and "no point" in choice["reason"]


def _rec_ci(point, tok, half_width_rel, ttft):
    rec = _rec(point, "passed", tok, ttft=ttft)
    rec["benchmark"]["levels"][0]["stats"] = {
        "steady_output_throughput": {"value": tok, "low": tok * (1 - half_width_rel),
                                     "high": tok * (1 + half_width_rel), "half_width": tok * half_width_rel,
                                     "half_width_rel": half_width_rel, "requests": 16},
        "precision_target": 0.02}
    return rec


def test_restore_takes_the_faster_point_unless_they_tie_and_says_the_rule():
    ordered = restore.choose_restore([_rec_ci("a", 100.0, 0.01, 10.0), _rec_ci("b", 110.0, 0.01, 50.0)], "h", "best",
                                     8, {}, ["a", "b"])
    assert ordered["point"] == "b" and ordered["ties"] == [] and "steady state 110 [" in ordered["reason"]
    tie = restore.choose_restore([_rec_ci("a", 100.0, 0.01, 10.0), _rec_ci("b", 101.0, 0.01, 50.0)], "h", "best",
                                 8, {}, ["a", "b"])
    assert tie["point"] == "a" and tie["ties"] == ["b"] and "lower p99 TTFT" in tie["reason"]
    record = records.build_restore_record({"action": "point", "point": "a", "ties": tie["ties"], "reason": "r"})
    assert record["ties"] == ["b"]
