"""The accuracy stage's reading of sglang's few-shot GSM8K evaluator: the answer extraction is the real one (run from
the sglang 0.5.9 wheel's own source), the driver patches the names the real evaluator imports, the shipped data is
the published test split, and bad input is refused before any request."""

from __future__ import annotations

import hashlib
import re

import pytest
from ansible_collections.moesweep.sweep.plugins.module_utils import gsm8k
from helpers.paths import REPO

DATA = REPO / "data" / "gsm8k" / "test.jsonl"
EVALUATOR = "sglang/test/few_shot_gsm8k.py"


def real_functions():
    """get_answer_value, get_one_example and get_few_shot_examples as the sglang 0.5.9 wheel defines them."""
    from simulator.gsm8k_evaluator import real_evaluator

    return real_evaluator()


def shipped_rows():
    return gsm8k.read_lines(DATA.read_text(encoding="utf-8"))


def test_the_shipped_data_is_the_published_test_split_with_its_license():
    data = DATA.read_bytes()
    sources = (DATA.parent / "SOURCES.md").read_text()
    assert hashlib.sha256(data).hexdigest() in sources and "3101c7d5072418e28b9008a6636bde82a006892c" in sources
    assert len(shipped_rows()) == 1319
    licence = (DATA.parent / "LICENSE").read_text()
    assert licence.startswith("MIT License") and "Copyright (c) 2021 OpenAI" in licence
    # every answer has a number: the evaluator asserts it of its labels
    assert len(gsm8k.labels(shipped_rows(), 1319)) == 1319


def test_answer_extraction_is_the_real_evaluators_on_every_shipped_answer_and_hard_cases():
    real = real_functions()["get_answer_value"]
    texts = [row["answer"] for row in shipped_rows()]
    texts += ["", "no number at all", "#### 1,234", "3.5 apples", "#### 0123", "-7", "a 12 b 0x1f", "1e5",
              " She makes 18 every day.\n#### 18\n\n", "#### 00", "\u0661\u0662", "12\n\nQuestion"]
    assert [gsm8k.answer_value(t) for t in texts] == [real(t) for t in texts]
    assert gsm8k.answer_value("#### 0123") == gsm8k.INVALID  # a leading zero is no Python literal


def test_the_driver_patches_what_the_real_evaluator_imports_and_calls():
    """The driver replaces RuntimeEndpoint (for the API key) and dump_state_text (for the answers) in the modules
    the real evaluator imports them from, before it runs; these names and calls must be the evaluator's."""
    from simulator.real_wheels import source

    src = source("sglang==0.5.9", EVALUATOR)
    assert "from sglang.lang.backend.runtime_endpoint import RuntimeEndpoint" in src
    assert re.search(r"from sglang\.utils import [^\n]*\bdump_state_text\b", src)
    assert 'dump_state_text("tmp_output_gsm8k.txt", states)' in src
    assert 'set_default_backend(RuntimeEndpoint(f"{args.host}:{args.port}"))' in src
    assert "import sglang.lang.backend.runtime_endpoint as endpoint" in gsm8k.DRIVER_SOURCE
    assert "import sglang.utils as utils" in gsm8k.DRIVER_SOURCE
    assert 'runpy.run_module("sglang.test.few_shot_gsm8k", run_name="__main__"' in gsm8k.DRIVER_SOURCE
    compile(gsm8k.DRIVER_SOURCE, "driver", "exec")
    # RuntimeEndpoint takes the key the driver gives it
    runtime = source("sglang==0.5.9", "sglang/lang/backend/runtime_endpoint.py")
    assert re.search(r"def __init__\(\s*self,\s*base_url: str,\s*api_key: Optional\[str\] = None", runtime)
    # every option the stage passes is one of the evaluator's own
    options = set(re.findall(r'add_argument\("(--[a-z-]+)"', src))
    args = gsm8k.evaluator_args("/d", 200, 5, 512, 128, "127.0.0.1", 8000)
    assert {a for a in args if a.startswith("--")} <= options
    assert args[args.index("--host") + 1] == "http://127.0.0.1" and args[args.index("--temperature") + 1] == "0"


@pytest.mark.parametrize("questions,shots,threshold,needle", [
    (0, 5, None, "at least 1"),
    (-3, 5, None, "at least 1"),
    (1320, 5, None, "holds 1319"),
    (200, -1, None, "num_shots -1"),
    (200, 5, 1.5, "outside 0..1"),
    (200, 5, -0.1, "outside 0..1"),
    ("200", 5, None, "must be an integer"),
])
def test_bad_input_is_refused(questions, shots, threshold, needle):
    with pytest.raises(gsm8k.AccuracyInputError, match=re.escape(needle)):
        gsm8k.check_inputs(questions, shots, 1319, threshold)


def test_good_input_passes():
    gsm8k.check_inputs(1, 0, 1319, 0.0)
    gsm8k.check_inputs(1319, 5, 1319, 1.0)


def test_bad_data_is_refused_naming_the_line():
    with pytest.raises(gsm8k.AccuracyInputError, match="line 2 .* not JSON"):
        gsm8k.read_lines('{"question": "q", "answer": "#### 1"}\n{oops\n')
    with pytest.raises(gsm8k.AccuracyInputError, match="line 1 of the GSM8K data has no question"):
        gsm8k.read_lines('{"q": 1}\n')
    assert gsm8k.read_lines('# a comment\n{"question": "q", "answer": "#### 1"}\n') == [
        {"question": "q", "answer": "#### 1"}]  # read_jsonl skips '#' lines


# run_eval's report lines (print(f"Accuracy: {acc:.3f}") ... in the 0.5.9 evaluator), as a run printed them
REPORT = """100%|##########| 12/12 [00:04<00:00,  2.98it/s]
Accuracy: 0.750
Invalid: 0.000
Latency: 4.114 s
Output throughput: 153.620 token/s
"""


def test_report_lines_are_the_evaluators_prints():
    from simulator.real_wheels import source

    src = source("sglang==0.5.9", EVALUATOR)
    for line in ('print(f"Accuracy: {acc:.3f}")', 'print(f"Invalid: {invalid:.3f}")',
                 'print(f"Latency: {latency:.3f} s")', 'print(f"Output throughput: {output_throughput:.3f} token/s")'):
        assert line in src
    assert gsm8k.parse_figures(REPORT) == {"accuracy": 0.75, "invalid": 0.0, "latency_s": 4.114,
                                           "output_throughput": 153.62}


def test_the_recount_must_agree_with_what_the_evaluator_printed():
    expected = [18, 3, 70000, 540]
    answers = ["#### 18\n\n", "#### 3", "#### 7000", "nothing"]
    scored = gsm8k.score(answers, expected)
    assert [s["correct"] for s in scored] == [True, True, False, False]
    assert [s["invalid"] for s in scored] == [False, False, False, True]
    figures = {"accuracy": 0.5, "invalid": 0.25}
    assert gsm8k.extraction_problems(scored, figures, 4, [18, 3, 7000, gsm8k.INVALID]) == []
    assert "printed accuracy 0.750" in gsm8k.extraction_problems(scored, dict(figures, accuracy=0.75), 4)[0]
    assert "read 7001" in gsm8k.extraction_problems(scored, figures, 4, [18, 3, 7001, gsm8k.INVALID])[0]
    assert "3 answers for 4 questions" in gsm8k.extraction_problems(scored[:3], figures, 4)[0]
    assert "no Accuracy line" in gsm8k.extraction_problems(scored, {"invalid": 0.25}, 4)[0]


def test_verdict_and_wrong_examples():
    assert gsm8k.verdict(0.79, 0.8)[0] == "bad_accuracy"
    assert gsm8k.verdict(0.8, 0.8)[0] == "ok"
    assert gsm8k.verdict(0.1, None) == ("ok", "accuracy 0.100 (no threshold: reported only)")
    rows = [{"question": f"q{i}", "answer": f"#### {i}"} for i in range(4)]
    answers = ["#### 0", "x" * 700, "#### 9", "#### 3"]
    scored = gsm8k.score(answers, [0, 1, 2, 3])
    examples = gsm8k.wrong_examples(scored, rows, answers, 5)
    assert [(e["index"], e["label"], e["value"]) for e in examples] == [(1, 1, None), (2, 2, 9)]
    assert len(examples[0]["answer"]) == gsm8k.EXAMPLE_CHARS and examples[0]["answer"].endswith("\u2026")
    assert len(gsm8k.wrong_examples(scored, rows, answers, 1)) == 1
