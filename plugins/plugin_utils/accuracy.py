# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The accuracy stage's settings and its comparison with a reference backend, as pure functions on the controller.

* ``plan_settings``: the stage's settings of a sweep, every one checked before any point (a subset of 0 questions or
  more than the shipped data holds, a threshold outside 0..1, a reference backend that is not a point of the sweep are
  refused, naming the fix), with the absolute threshold resolved: the user's, else the published figure of the
  model's family (``FAMILY_THRESHOLDS``), else none (the accuracy is then judged against the reference only).
* ``data_file_questions``: the GSM8K file the stage will copy to the host, read on the controller as the evaluator
  reads it (``module_utils/gsm8k.py``, the host's own check) - missing, unreadable, malformed or too short for the
  subset is refused at plan time, before anything on the host changes, not after the first point's restart.
* ``two_proportion_test``: is a point's accuracy lower than the reference's by more than the sampling noise of the
  subset? The pooled two-proportion z-test, one-sided (H1: the point's share of correct answers is lower):
  z = (p_ref - p) / sqrt(q (1 - q) (1/n_ref + 1/n)), q = (x_ref + x) / (n_ref + n); the drop is flagged when
  P(Z >= z) < ``ALPHA``. Both arms answer the same questions, so the test is conservative (an exact paired test,
  McNemar's, would need both points' answers side by side: the records keep only the first wrong ones).
* ``reference_comparisons``: the reference of each host's points (the named backend, else the host's first point that
  passed with an accuracy) and every point's comparison with it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import os
import re

from ansible_collections.moesweep.sweep.plugins.module_utils import gsm8k

ALPHA = 0.05
# The GSM8K test split in data/gsm8k/ (SOURCES.md there).
SHIPPED_QUESTIONS = 1319
TEST_NAME = "two-proportion z-test (pooled, one-sided: is the point's accuracy lower than the reference's?)"

# Published GSM8K floors of sglang's own CI per model family, on the model path (first match wins). A floor, not the
# model's score: below it sglang's CI calls the serving stack broken. Other families have no default.
FAMILY_THRESHOLDS = (
    (re.compile(r"glm-?5", re.I), 0.80,
     "sglang's nightly GSM8K baseline for GLM-5 (zai-org/GLM-5-FP8, tp 8): AccuracyTestParams(dataset='gsm8k', "
     "baseline_accuracy=0.80), https://github.com/sgl-project/sglang/blob/0da3eae5c4d37599f0e31bf73606d6d56ae96fbf/"
     "test/registered/8-gpu-models/test_glm_5.py"),
    (re.compile(r"glm-?4\.[56]", re.I), 0.80,
     "sglang's nightly GSM8K baseline for GLM-4.6 (zai-org/GLM-4.6, tp 8): AccuracyTestParams(dataset='gsm8k', "
     "baseline_accuracy=0.80), https://github.com/sgl-project/sglang/blob/0f54280b8bd917d06ccb3ecdfa53be9c8a3fbf11/"
     "test/registered/8-gpu-models/test_glm_46.py"),
    (re.compile(r"deepseek-(v3|r1)", re.I), 0.92,
     "sglang's CI floor for DeepSeek-R1 NVFP4 on the flashinfer_cutedsl MoE backend: GSM8K score > 0.92, "
     "https://github.com/sgl-project/sglang/blob/00e86683f4d77778c6592eb8b5bc5b457b8cd440/"
     "test/registered/4-gpu-models/test_deepseek_v3_cutedsl_4gpu.py"),
)


class AccuracySettingsError(ValueError):
    """Bad accuracy settings: the message names the problem and the fix."""


def default_threshold(model_path):
    """(threshold, source) of the model's family, or (None, why there is none)."""
    for pattern, value, source in FAMILY_THRESHOLDS:
        if pattern.search(str(model_path or "")):
            return value, source
    return None, ("no published GSM8K figure for the family of %r: the accuracy is compared with the reference "
                  "backend only (set sglang_bench_accuracy_threshold for an absolute floor)" % (model_path,))


def _integer(name, value):
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)  # -e NAME=200 arrives as a string
    if isinstance(value, bool) or not isinstance(value, int):
        raise AccuracySettingsError("%s=%r is not an integer: give a number of questions, e.g. -e %s=200"
                                    % (name, value, name))
    return value


def data_file_questions(path, questions, shots):
    """How many questions the GSM8K file at ``path`` (on the controller) holds, once it is read as sglang's
    evaluator reads it and its first ``questions`` answers give a number. Raises AccuracySettingsError naming the
    file, the problem and the fix."""
    fix = ("give a JSONL file of GSM8K rows ({\"question\": ..., \"answer\": \"... #### 42\"}) with "
           "sglang_bench_accuracy_data_src, or leave it empty for the shipped data/gsm8k/test.jsonl")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (IOError, OSError, UnicodeDecodeError) as exc:
        raise AccuracySettingsError("sglang_bench_accuracy_data_src=%s cannot be read on the controller (%s): %s"
                                    % (path, getattr(exc, "strerror", None) or exc, fix)) from None
    try:
        rows = gsm8k.read_lines(text)
        if not rows:
            raise gsm8k.AccuracyInputError("it holds no question")
        gsm8k.check_inputs(questions, shots, len(rows))
        gsm8k.labels(rows, questions)
    except gsm8k.AccuracyInputError as exc:
        raise AccuracySettingsError("sglang_bench_accuracy_data_src=%s: %s (%s)" % (path, exc, fix)) from None
    return len(rows)


def plan_settings(given, points, model_path, available=SHIPPED_QUESTIONS):
    """The accuracy settings of a sweep: {enabled, questions, shots, threshold, threshold_source, reference, alpha}.
    ``given``: {enabled, questions, shots, threshold, reference, data_src} (the role's variables and
    -e accuracy_reference; ``data_src``: the controller's path of the GSM8K file the stage copies, read here when the
    stage is on). ``points``: the sweep's points (a list, or 'compatible' before the knowledge base resolved them:
    then any name of ``points_known`` is accepted by the caller)."""
    given = dict(given or {})
    enabled = given.get("enabled", True)
    if isinstance(enabled, str):
        enabled = enabled.strip().lower() in ("1", "true", "yes", "on")
    questions = _integer("sglang_bench_accuracy_questions", given.get("questions", 200))
    shots = _integer("sglang_bench_accuracy_shots", given.get("shots", 5))
    data_src = given.get("data_src") or None
    if enabled and data_src:
        available = data_file_questions(os.path.expanduser(str(data_src)), max(questions, 1), shots)
    if questions < 1:
        raise AccuracySettingsError("sglang_bench_accuracy_questions=%d: the subset must hold at least 1 question "
                                    "(the default is 200); turn the stage off with sglang_bench_accuracy_enabled=false"
                                    % questions)
    if questions > available:
        source = "GSM8K file %s" % data_src if data_src else "shipped GSM8K test split"
        raise AccuracySettingsError("sglang_bench_accuracy_questions=%d: the %s holds %d questions; ask at most %d"
                                    % (questions, source, available, available))
    if not 0 <= shots <= available:
        raise AccuracySettingsError("sglang_bench_accuracy_shots=%d is outside 0..%d (sglang's default is 5)"
                                    % (shots, available))
    threshold = given.get("threshold")
    if threshold in ("", None):
        threshold, source = default_threshold(model_path)
    else:
        try:
            threshold = float(threshold)
        except (TypeError, ValueError):
            raise AccuracySettingsError("sglang_bench_accuracy_threshold=%r is not a number: give a share of correct "
                                        "answers within 0..1, e.g. 0.8" % (threshold,)) from None
        if isinstance(given.get("threshold"), bool) or not 0 <= threshold <= 1 or math.isnan(threshold):
            raise AccuracySettingsError("sglang_bench_accuracy_threshold=%r is outside 0..1: give a share of correct "
                                        "answers, e.g. 0.8 (not a percentage)" % (given.get("threshold"),))
        source = "sglang_bench_accuracy_threshold"
    reference = given.get("reference")
    reference = None if reference in ("", None) else str(reference)
    if reference is not None and isinstance(points, (list, tuple)) and reference not in points:
        raise AccuracySettingsError("accuracy reference backend %r is not a point of this sweep (%s): name one of "
                                    "them with -e accuracy_reference=NAME, or leave it out (the first point that "
                                    "passes is the reference)" % (reference, ", ".join(points)))
    return {"enabled": bool(enabled), "questions": questions, "shots": shots, "threshold": threshold,
            "threshold_source": source, "reference": reference, "alpha": ALPHA}


def _normal_sf(z):
    """P(Z >= z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def two_proportion_test(correct, n, ref_correct, ref_n, alpha=ALPHA):
    """{test, accuracy, reference_accuracy, drop, z, p_value, confidence, flagged}: whether ``correct`` of ``n`` is
    lower than ``ref_correct`` of ``ref_n`` by more than the sampling noise (see the module docstring)."""
    for name, value in (("n", n), ("ref_n", ref_n)):
        if not value or value <= 0:
            raise ValueError("%s must be positive, got %r" % (name, value))
    p, p_ref = correct / float(n), ref_correct / float(ref_n)
    pooled = (correct + ref_correct) / float(n + ref_n)
    se = math.sqrt(pooled * (1.0 - pooled) * (1.0 / n + 1.0 / ref_n))
    if se == 0.0:
        z, p_value = 0.0, 1.0  # both all right or all wrong: no difference to test
    else:
        z = (p_ref - p) / se
        p_value = _normal_sf(z)
    return {"test": TEST_NAME, "accuracy": p, "reference_accuracy": p_ref, "drop": p_ref - p, "z": z,
            "p_value": p_value, "confidence": 1.0 - p_value, "alpha": alpha, "flagged": p_value < alpha}


def counts(record):
    """(correct, n) of a point's accuracy stage, or None when it has no verdict."""
    acc = (record or {}).get("accuracy") or {}
    if acc.get("state") not in ("ok", "bad_accuracy"):
        return None
    n, correct = acc.get("num_questions"), acc.get("correct")
    if not isinstance(n, int) or not isinstance(correct, int) or n <= 0:
        return None
    return correct, n


def reference_comparisons(records):
    """{id(record): comparison} for every point record with an accuracy and a reference on its host: the named
    reference (the records' ``accuracy.settings.reference``), else the host's first point that passed with an accuracy.
    A comparison: two_proportion_test's keys plus ``reference`` (its point) - the reference itself gets none."""
    by_host = {}
    for record in records:
        by_host.setdefault(record.get("host"), []).append(record)
    out = {}
    for group in by_host.values():
        named = next((((r.get("accuracy") or {}).get("settings") or {}).get("reference") for r in group
                      if ((r.get("accuracy") or {}).get("settings") or {}).get("reference")), None)
        if named:
            ref = next((r for r in reversed(group) if r.get("point") == named and counts(r)), None)
        else:
            ref = next((r for r in group if r.get("status") == "passed" and counts(r)), None)
        if ref is None:
            continue
        ref_correct, ref_n = counts(ref)
        for record in group:
            mine = counts(record)
            if record is ref or mine is None:
                continue
            out[id(record)] = dict(two_proportion_test(mine[0], mine[1], ref_correct, ref_n),
                                   reference=ref.get("point"))
    return out
