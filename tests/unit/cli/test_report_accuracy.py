"""The report of a sweep with an accuracy stage: the accuracy column, the accuracy-against-throughput plot and the
wrong answers of a bad_accuracy point. The recorded simulated sweep of tests/fixtures/results/, with the accuracy
stage's result added to two of its points as sglang_accuracy returns it."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.paths import FIXTURES

from moesweep import report

SIM = FIXTURES / "results" / "sim-rtx6000-0.5.9" / "points.jsonl"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WRONG = {"index": 0, "question": "Janet's ducks lay 16 eggs per day...", "label": 18, "value": 19,
         "answer": " Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n#### 19\n\n"}


def test_the_report_shows_accuracy_its_plot_and_the_wrong_answers(tmp_path):
    lines = []
    for line in SIM.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("point") == "flashinfer_cutlass" and rec["kind"] == "point":
            rec["status"] = "bad_accuracy"
            rec["accuracy"] = {"state": "bad_accuracy", "accuracy": 0.55, "correct": 11, "num_questions": 20,
                               "threshold": 0.8, "wrong_examples": [WRONG],
                               "settings": {"threshold_source": "sglang's nightly GSM8K baseline for GLM-5"}}
        elif rec.get("point") == "cutlass" and rec["kind"] == "point":
            rec["accuracy"] = {"state": "ok", "accuracy": 1.0, "correct": 20, "num_questions": 20, "threshold": 0.8}
        lines.append(json.dumps(rec))
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "points.jsonl").write_text("\n".join(lines) + "\n")
    out = report.build_report([sweep], tmp_path / "out")
    plots = {Path(p).name: Path(p) for p in out["plots"]}
    assert "simulated-accuracy.png" in plots and plots["simulated-accuracy.png"].read_bytes().startswith(PNG_MAGIC)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| GSM8K accuracy |" in md
    assert "0.550 (11/20) < 0.80 DROP vs cutlass 1.000" in md
    assert "1.000 (20/20)" in md
    # under Failures: the verdict, where the threshold comes from, the wrong answer
    assert "GSM8K accuracy 0.550 (11/20) < threshold 0.800" in md
    assert "threshold from: sglang's nightly GSM8K baseline for GLM-5" in md
    assert "Q0: Janet's ducks lay 16 eggs per day... | expected 18, answered 19" in md
    # the best (and what a restore puts back) is no longer the faster wrong point
    assert "Best SIMULATED: sim-h1 / cutlass" in md
