"""The accuracy stage's sweep settings (refused before any point), the per-family thresholds and the two-proportion
test that flags a drop against the reference backend."""

from __future__ import annotations

import math
import re

import pytest
from ansible_collections.moesweep.sweep.plugins.plugin_utils import accuracy, records, restore, status, summary
from helpers.paths import REPO

POINTS = ["flashinfer_cutlass", "triton"]
GLM5 = "lukealonso/GLM-5-NVFP4"


@pytest.mark.parametrize("given,needle", [
    ({"questions": 0}, "at least 1 question"),
    ({"questions": "0"}, "at least 1 question"),
    ({"questions": 1320}, "holds 1319"),
    ({"questions": "many"}, "is not an integer"),
    ({"threshold": 1.5}, "outside 0..1"),
    ({"threshold": -0.01}, "outside 0..1"),
    ({"threshold": "95"}, "outside 0..1"),
    ({"threshold": "abc"}, "is not a number"),
    ({"threshold": True}, "outside 0..1"),
    ({"shots": -1}, "outside 0..1319"),
    ({"reference": "cutlass"}, "'cutlass' is not a point of this sweep"),
])
def test_bad_settings_are_refused_naming_the_fix(given, needle):
    with pytest.raises(accuracy.AccuracySettingsError, match=re.escape(needle)):
        accuracy.plan_settings(given, POINTS, GLM5)


SHIPPED = REPO / "data" / "gsm8k" / "test.jsonl"
ROW = '{"question": "Two plus two?", "answer": "2 + 2 = 4\\n#### 4"}\n'


@pytest.mark.parametrize("text,questions,needle", [
    (None, 5, "cannot be read on the controller (No such file or directory)"),
    ("", 5, "it holds no question"),
    (ROW * 3 + "{not json\n", 2, "line 4 of the GSM8K data is not JSON"),
    (ROW + '{"question": "q"}\n', 1, "line 2 of the GSM8K data has no question and answer strings"),
    (ROW * 3, 5, "the subset asks 5 questions but the GSM8K data holds 3"),
    ('{"question": "q", "answer": "none"}\n' + ROW * 5, 3, "question 0 of the GSM8K data has no number"),
])
def test_the_gsm8k_file_the_stage_would_copy_is_read_at_plan_time(tmp_path, text, questions, needle):
    # the plan reads the file as sglang's evaluator reads it (module_utils/gsm8k.py, the host's own check), so a
    # file the stage could not use is refused before anything on the host changes
    path = tmp_path / "gsm8k.jsonl"
    if text is not None:
        path.write_text(text)
    with pytest.raises(accuracy.AccuracySettingsError) as err:
        accuracy.plan_settings({"questions": questions, "shots": 1, "data_src": str(path)}, POINTS, GLM5)
    assert str(err.value).startswith(f"sglang_bench_accuracy_data_src={path}") and needle in str(err.value)
    assert "leave it empty for the shipped data/gsm8k/test.jsonl" in str(err.value)


def test_a_good_gsm8k_file_sets_how_many_questions_may_be_asked(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    path.write_text("# a comment line, skipped as read_jsonl skips it\n" + ROW * 7)
    got = accuracy.plan_settings({"questions": 7, "shots": 2, "data_src": str(path)}, POINTS, GLM5)
    assert got["questions"] == 7
    assert accuracy.data_file_questions(str(SHIPPED), 200, 5) == accuracy.SHIPPED_QUESTIONS
    # off: the file is not read
    assert not accuracy.plan_settings({"enabled": False, "data_src": str(tmp_path / "none")}, POINTS, GLM5)["enabled"]


def test_settings_resolve_the_family_threshold_unless_given():
    got = accuracy.plan_settings({"questions": "50", "reference": "triton"}, POINTS, GLM5)
    assert got["questions"] == 50 and got["shots"] == 5 and got["reference"] == "triton" and got["enabled"]
    assert got["threshold"] == 0.80 and "test_glm_5.py" in got["threshold_source"]
    assert got["threshold_source"].count("https://github.com/sgl-project/sglang/blob/") == 1
    mine = accuracy.plan_settings({"threshold": "0.9"}, POINTS, GLM5)
    assert mine["threshold"] == 0.9 and mine["threshold_source"] == "sglang_bench_accuracy_threshold"
    unknown = accuracy.plan_settings({}, POINTS, "meta-llama/Llama-3.1-8B-Instruct")
    assert unknown["threshold"] is None and "no published GSM8K figure" in unknown["threshold_source"]
    assert accuracy.plan_settings({"enabled": "false"}, POINTS, GLM5)["enabled"] is False


def test_every_family_threshold_is_a_share_with_a_public_source():
    for pattern, value, source in accuracy.FAMILY_THRESHOLDS:
        assert 0 < value < 1 and re.search(r"https://github\.com/\S+/blob/[0-9a-f]{40}/", source), pattern
    assert accuracy.default_threshold("deepseek-ai/DeepSeek-R1-0528-FP4")[0] == 0.92
    assert accuracy.default_threshold("zai-org/GLM-4.6")[0] == 0.80


def test_the_two_proportion_test_by_hand():
    # 150/200 against 190/200: pooled 340/400 = 0.85, se = sqrt(0.85 * 0.15 * (1/200 + 1/200)) = 0.035707
    t = accuracy.two_proportion_test(150, 200, 190, 200)
    assert t["z"] == pytest.approx(0.20 / math.sqrt(0.85 * 0.15 * 0.01), rel=1e-9) == pytest.approx(5.6011, abs=1e-4)
    assert t["flagged"] and t["p_value"] < 1e-7 and t["drop"] == pytest.approx(0.2)
    # 186/200 against 190/200: a drop of 2 points is noise on 200 questions
    t = accuracy.two_proportion_test(186, 200, 190, 200)
    assert not t["flagged"] and 0.05 < t["p_value"] < 0.5
    # the one-sided 5 % point of the normal is 1.6449: a z just above it is flagged, just below it is not
    assert accuracy._normal_sf(1.6449) == pytest.approx(0.05, abs=1e-4)
    # a better point is never a drop; two perfect points are no difference
    assert not accuracy.two_proportion_test(199, 200, 150, 200)["flagged"]
    assert accuracy.two_proportion_test(200, 200, 200, 200) == dict(
        accuracy.two_proportion_test(200, 200, 200, 200), z=0.0, p_value=1.0, flagged=False)
    with pytest.raises(ValueError):
        accuracy.two_proportion_test(1, 0, 1, 1)


def _rec(point, status, correct, n=200, host="h", tok=100.0, reference=None, state=None):
    return {"kind": "point", "host": host, "point": point, "backend": point, "status": status,
            "benchmark": {"levels": [{"concurrency": 8, "ok": True, "figures": {"output_throughput": tok}}]},
            "accuracy": {"state": state or ("bad_accuracy" if status == "bad_accuracy" else "ok"),
                         "accuracy": correct / float(n), "correct": correct, "num_questions": n, "threshold": 0.8,
                         "settings": {"reference": reference}}}


def test_the_reference_is_the_first_passing_point_of_the_host_unless_named():
    recs = [_rec("a", "crashed", 0, state="server_died"), _rec("b", "passed", 190), _rec("c", "passed", 150),
            _rec("d", "passed", 186), _rec("e", "passed", 100, host="other")]
    got = accuracy.reference_comparisons(recs)
    assert id(recs[1]) not in got and id(recs[0]) not in got and id(recs[4]) not in got  # e: alone on its host
    assert got[id(recs[2])]["reference"] == "b" and got[id(recs[2])]["flagged"]
    assert not got[id(recs[3])]["flagged"]
    named = [_rec("b", "passed", 190, reference="c"), _rec("c", "passed", 150, reference="c")]
    got = accuracy.reference_comparisons(named)
    assert got[id(named[0])]["reference"] == "c" and not got[id(named[0])]["flagged"]


def test_a_bad_accuracy_point_is_never_the_best_nor_restored_however_fast():
    recs = [_rec("fast", "bad_accuracy", 120, tok=900.0), _rec("slow", "passed", 190, tok=100.0)]
    assert summary.best_point(recs, 8)["point"] == "slow"
    choice = restore.choose_restore(recs, "h", "best", 8, {"unit": True}, ["fast", "slow"])
    assert choice["action"] == "point" and choice["point"] == "slow"
    rows = summary.summary_rows(recs, 8)
    assert [r["best"] for r in rows] == [False, True]
    cell = summary.accuracy_cell(rows[0])
    assert cell.startswith("0.600 (120/200) < 0.80") and "DROP vs slow 0.950" in cell
    md = summary.render_markdown(rows)
    assert "GSM8K accuracy" in md and "two-proportion z-test" in md
    assert "bad_accuracy" in summary.render_csv(rows) and "accuracy_drop_p_value" in summary.render_csv(rows)


def test_bad_accuracy_status_from_the_stages():
    ready, smoke, bench = {"state": "ready"}, {"state": "ok"}, {"state": "ok"}
    assert status.point_status(None, {}, ready, smoke, bench, {}, {"state": "bad_accuracy"}) == ("bad_accuracy", None)
    assert status.point_status(None, {}, ready, smoke, bench, {}, {"state": "ok"}) == ("passed", None)
    assert status.point_status(None, {}, ready, smoke, bench, {}) == ("passed", None)  # no stage: as before
    died = {"state": "server_died", "crash": {"cause": "oom"}}
    assert status.point_status("accuracy", {}, ready, smoke, {}, {}, died) == ("crashed", "oom")
    # a crash in the benchmark outranks a bad accuracy; a bad accuracy outranks a failed level
    assert status.point_status(None, {}, ready, smoke, {"state": "server_died", "crash": {"cause": "nccl"}}, {},
                               {"state": "bad_accuracy"}) == ("crashed", "nccl")
    assert status.point_status(None, {}, ready, smoke, {"state": "failed"}, {},
                               {"state": "bad_accuracy"}) == ("bad_accuracy", None)
    assert status.stage_of("moesweep.sweep.sglang_accuracy") == "accuracy"
    assert status.point_status("accuracy", {}, ready, smoke, {}, {}, {"state": "error"}) == ("failed", None)


def test_the_record_keeps_the_stage_and_its_settings():
    rec = records.build_point_record({
        "point": "p", "readiness": {"state": "ready"}, "smoke": {"state": "ok"},
        "accuracy": {"state": "bad_accuracy", "accuracy": 0.6, "correct": 120, "num_questions": 200,
                     "wrong_examples": [{"index": 0}], "changed": False, "invocation": {}},
        "accuracy_settings": {"threshold": 0.8, "threshold_source": "x"}})
    assert rec["status"] == "bad_accuracy"
    assert rec["accuracy"]["correct"] == 120 and rec["accuracy"]["settings"]["threshold"] == 0.8
    assert "invocation" not in rec["accuracy"]
    assert "GSM8K accuracy 0.600 (120/200)" in summary.decisive(rec)
    details = summary.failure_details(dict(rec, accuracy=dict(rec["accuracy"], wrong_examples=[
        {"index": 3, "question": "How many?", "label": 5, "value": 6, "answer": "so 6\n#### 6"}])))
    assert details["excerpt"].startswith("Q3: How many? | expected 5, answered 6")
