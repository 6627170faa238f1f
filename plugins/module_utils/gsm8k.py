# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""sglang's few-shot GSM8K evaluator, as the accuracy stage runs and reads it (pure functions).

The stage runs the real ``python -m sglang.test.few_shot_gsm8k`` of the benchmark client venv (sglang 0.5.9
``python/sglang/test/few_shot_gsm8k.py``, https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/test/
few_shot_gsm8k.py) through ``DRIVER_SOURCE``: the evaluator's own prompts (the first ``--num-shots`` lines of the data
file with their answers, then ``"Question: " + question + "\\nAnswer:"``), its greedy sampling (temperature 0), its
subset (the first ``--num-questions`` lines: no sampling, so no seed to fix), its answer extraction and its printed
figures. The driver adds two things the evaluator's command line lacks: the server's API key (``RuntimeEndpoint``'s
``api_key``, which ``run_eval`` never passes) and every answer text (the states ``run_eval`` hands to
``dump_state_text``), so the wrong answers can be shown.

``answer_value`` is ``get_answer_value`` of that file, line for line: the last run of digits of the text, commas
removed, else ``INVALID``. The stage scores every answer again with it and checks that the recount equals the
accuracy sglang printed (``extraction_problems``): a client venv whose evaluator extracts answers differently is an
error, not a figure.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import json
import re

INVALID = -9999999
DEFAULT_QUESTIONS = 200
DEFAULT_SHOTS = 5
DEFAULT_MAX_NEW_TOKENS = 512
DEFAULT_PARALLEL = 128
# The lines of few_shot_gsm8k's report (run_eval's prints), in its format.
_FIGURES = (("accuracy", re.compile(r"^Accuracy: (-?[0-9.]+)$")),
            ("invalid", re.compile(r"^Invalid: (-?[0-9.]+)$")),
            ("latency_s", re.compile(r"^Latency: (-?[0-9.]+) s$")),
            ("output_throughput", re.compile(r"^Output throughput: (-?[0-9.]+) token/s$")))
EXAMPLE_CHARS = 600


class AccuracyInputError(ValueError):
    """Bad input to the stage: the message names the problem and the fix."""


def answer_value(text):
    """The number few_shot_gsm8k reads from an answer (``get_answer_value``): the last run of digits once commas are
    removed, or INVALID when there is none."""
    text = (text or "").replace(",", "")
    numbers = re.findall(r"\d+", text)
    if len(numbers) < 1:
        return INVALID
    try:
        return ast.literal_eval(numbers[-1])
    except SyntaxError:
        return INVALID  # e.g. "0123": a leading zero is no Python int literal, and sglang counts it invalid


def read_lines(text):
    """The data file's rows as ``sglang.utils.read_jsonl`` reads them (lines starting with ``#`` skipped).
    Raises AccuracyInputError naming the first bad line."""
    rows = []
    for number, line in enumerate((text or "").splitlines(True), 1):
        if line.startswith("#") or not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise AccuracyInputError("line %d of the GSM8K data is not JSON (%s): give the shipped "
                                     "data/gsm8k/test.jsonl" % (number, exc)) from exc
        if not isinstance(row, dict) or not isinstance(row.get("question"), str) \
                or not isinstance(row.get("answer"), str):
            raise AccuracyInputError("line %d of the GSM8K data has no question and answer strings: give the "
                                     "shipped data/gsm8k/test.jsonl" % number)
        rows.append(row)
    return rows


def check_inputs(num_questions, num_shots, available, threshold=None):
    """Refuse what the evaluator cannot run or what makes no verdict: at least one question, no more than the data
    holds, shots within the data, a threshold within 0..1."""
    for name, value in (("num_questions", num_questions), ("num_shots", num_shots)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise AccuracyInputError("%s must be an integer, got %r" % (name, value))
    if num_questions < 1:
        raise AccuracyInputError("the subset has %d questions: ask at least 1 (the default is %d)"
                                 % (num_questions, DEFAULT_QUESTIONS))
    if num_questions > available:
        raise AccuracyInputError("the subset asks %d questions but the GSM8K data holds %d: ask at most %d"
                                 % (num_questions, available, available))
    if num_shots < 0 or num_shots > available:
        raise AccuracyInputError("num_shots %d is outside 0..%d (the examples are the data's first lines; sglang's "
                                 "default is %d)" % (num_shots, available, DEFAULT_SHOTS))
    if threshold is not None:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            raise AccuracyInputError("the accuracy threshold %r is outside 0..1: give a share of correct answers, "
                                     "e.g. 0.8" % (threshold,))


def labels(rows, num_questions):
    """The reference numbers of the first ``num_questions`` rows (few_shot_gsm8k's ``labels``)."""
    out = [answer_value(row["answer"]) for row in rows[:num_questions]]
    bad = [i for i, value in enumerate(out) if value == INVALID]
    if bad:
        raise AccuracyInputError("question %d of the GSM8K data has no number in its answer: give the shipped "
                                 "data/gsm8k/test.jsonl" % bad[0])
    return out


def evaluator_args(data_path, num_questions, num_shots, max_new_tokens, parallel, host, port):
    """few_shot_gsm8k's command line (its own argparse options)."""
    return ["--data-path", data_path, "--num-questions", str(num_questions), "--num-shots", str(num_shots),
            "--max-new-tokens", str(max_new_tokens), "--parallel", str(parallel), "--host", "http://%s" % host,
            "--port", str(port), "--temperature", "0"]


def parse_figures(text):
    """{accuracy, invalid, latency_s, output_throughput} from the evaluator's report (absent lines missing)."""
    out = {}
    for line in (text or "").splitlines():
        line = line.strip()
        for key, pattern in _FIGURES:
            m = pattern.match(line)
            if m:
                out[key] = float(m.group(1))
    return out


def score(answers, expected):
    """Per question: {index, answer_value, label, correct, invalid}, with sglang's extraction."""
    out = []
    for i, (text, label) in enumerate(zip(answers, expected)):  # noqa: B905 - checked equal by the caller
        value = answer_value(text)
        out.append({"index": i, "value": value, "label": label, "correct": value == label,
                    "invalid": value == INVALID})
    return out


def extraction_problems(scored, figures, num_questions, evaluator_values=None):
    """Why the recount disagrees with what sglang printed (empty when it agrees): a number of answers other than the
    questions asked, an accuracy or invalid share other than the recount's (to the printed 3 decimals), or an answer
    the evaluator read differently (``evaluator_values``: its own ``get_answer_value`` of each answer)."""
    problems = []
    if len(scored) != num_questions:
        problems.append("the evaluator returned %d answers for %d questions" % (len(scored), num_questions))
        return problems
    n = float(max(1, num_questions))
    for key, count in (("accuracy", sum(1 for s in scored if s["correct"])),
                       ("invalid", sum(1 for s in scored if s["invalid"]))):
        printed = figures.get(key)
        if printed is None:
            problems.append("the evaluator printed no %s line" % key.capitalize())
        elif abs(printed - round(count / n, 3)) > 0.0015:
            problems.append("the evaluator printed %s %.3f, the recount of its answers gives %.3f"
                            % (key, printed, count / n))
    if evaluator_values is not None:
        for s, value in zip(scored, evaluator_values):  # noqa: B905
            if value != s["value"]:
                problems.append("answer %d: the evaluator read %r, the recount %r" % (s["index"], value, s["value"]))
                break
    return problems


def verdict(accuracy, threshold):
    """(state, reason): ``bad_accuracy`` below the threshold, ``ok`` otherwise (and without a threshold)."""
    if threshold is None:
        return "ok", "accuracy %.3f (no threshold: reported only)" % accuracy
    if accuracy < threshold:
        return "bad_accuracy", "accuracy %.3f is below the threshold %.3f" % (accuracy, threshold)
    return "ok", "accuracy %.3f is at or above the threshold %.3f" % (accuracy, threshold)


def wrong_examples(scored, rows, answers, limit):
    """The first ``limit`` wrong answers: {index, question, label, value, answer} (texts clipped)."""
    out = []
    for s in scored:
        if s["correct"]:
            continue
        if len(out) >= limit:
            break
        text = answers[s["index"]] or ""
        out.append({"index": s["index"], "question": rows[s["index"]]["question"][:EXAMPLE_CHARS],
                    "label": s["label"], "value": None if s["invalid"] else s["value"],
                    "answer": text if len(text) <= EXAMPLE_CHARS else text[:EXAMPLE_CHARS - 1] + "\u2026"})
    return out


# Runs in the client venv: `python -c DRIVER_SOURCE OUT_JSON ARGS...` is `python -m sglang.test.few_shot_gsm8k ARGS`
# (runpy, as -m runs it) with the server's API key (env MOESWEEP_ACCURACY_API_KEY, never on a command line) given to
# RuntimeEndpoint, and the answers the evaluator dumps written to OUT_JSON with its own get_answer_value of each.
DRIVER_SOURCE = r'''
import functools, json, os, runpy, sys, time

def main(out_path, args):
    import sglang.lang.backend.runtime_endpoint as endpoint
    import sglang.utils as utils
    key = os.environ.pop("MOESWEEP_ACCURACY_API_KEY", "")
    if key:
        endpoint.RuntimeEndpoint = functools.partial(endpoint.RuntimeEndpoint, api_key=key)
    seen = {}
    dump = utils.dump_state_text

    def capture(filename, states, *rest, **kw):
        seen["answers"] = [s["answer"] for s in states]
        seen["finish"] = [(s.get_meta_info("answer") or {}).get("finish_reason") for s in states]
        seen["completion_tokens"] = [(s.get_meta_info("answer") or {}).get("completion_tokens") for s in states]
        return dump(filename, states, *rest, **kw)

    utils.dump_state_text = capture
    sys.argv = ["few_shot_gsm8k"] + args
    t0 = time.time()
    runpy.run_module("sglang.test.few_shot_gsm8k", run_name="__main__", alter_sys=True)
    from sglang.test.few_shot_gsm8k import get_answer_value
    seen["values"] = [get_answer_value(a) for a in seen.get("answers", [])]
    seen["seconds"] = time.time() - t0
    with open(out_path + ".tmp", "w") as fh:
        json.dump(seen, fh)
    os.replace(out_path + ".tmp", out_path)

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
'''
