"""sglang_accuracy refuses bad input before any request or process: the evaluator never starts (its client is a
path that does not exist, so a start would fail differently)."""

from __future__ import annotations

import pytest
from ansible_collections.moesweep.sweep.plugins.modules import sglang_accuracy
from helpers.paths import REPO

DATA = str(REPO / "data" / "gsm8k" / "test.jsonl")


@pytest.mark.parametrize("args,needle", [
    ({"num_questions": 0}, "at least 1"),
    ({"num_questions": 5000}, "holds 1319"),
    ({"threshold": 1.2}, "outside 0..1"),
    ({"threshold": -0.5}, "outside 0..1"),
    ({"parallel": 0}, "must be > 0"),
    ({"data_path": "/nonexistent/test.jsonl"}, "cannot read the GSM8K data"),
    ({"client_python": "/nonexistent/python"}, "the benchmark client /nonexistent/python does not exist"),
    ({"unit": "bad unit name!"}, "unit"),
])
def test_bad_input_fails_before_the_evaluator_starts(run_module, tmp_path, args, needle):
    given = {"data_path": DATA, "output_dir": str(tmp_path / "out"), "client_python": "/nonexistent/python"}
    if "client_python" not in args:
        given["client_python"] = "/bin/true"
    given.update(args)
    kind, result = run_module(sglang_accuracy, given)
    assert kind == "fail" and result["state"] == "error" and needle in result["msg"], result["msg"]
    assert not (tmp_path / "out" / "evaluator.log").exists()


def test_bad_data_is_refused(run_module, tmp_path):
    bad = tmp_path / "test.jsonl"
    bad.write_text('{"question": "q", "answer": "no number"}\n')
    kind, result = run_module(sglang_accuracy, {"data_path": str(bad), "output_dir": str(tmp_path / "o"),
                                                "num_questions": 1, "num_shots": 0, "client_python": "/bin/true"})
    assert kind == "fail" and "has no number in its answer" in result["msg"]
