#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_accuracy
short_description: Measure a ready SGLang server's accuracy with sglang's own few-shot GSM8K evaluator
description:
  - Runs on the target, after the smoke check. Runs the real C(python -m sglang.test.few_shot_gsm8k) of the benchmark
    client venv (sglang 0.5.9's evaluator, which that venv installs with C(sglang.bench_serving)) against the server,
    on the GSM8K file in O(data_path) (never downloaded) - the evaluator's prompts (O(num_shots) worked examples, the
    data's first lines, then each question), greedy sampling, its fixed subset (the first O(num_questions) questions;
    nothing is sampled, so there is no seed) and its answer extraction (the last number of the answer).
  - The server's API key reaches the evaluator's C(RuntimeEndpoint) through the environment, never a command line
    (the evaluator's own command line has no key option); every answer is kept, scored again with the evaluator's
    extraction and checked against the accuracy it printed - a disagreement is an error, not a figure.
  - Returns the accuracy, the share of answers without a number (C(invalid)), the evaluator's latency and output
    throughput, and the first wrong answers (RV(wrong_examples)). Below O(threshold) the verdict is
    RV(state=bad_accuracy); the task still succeeds then (the point is measured and recorded as such), unless
    O(fail_on_bad_accuracy).
  - When the evaluator fails because the server died, reads the unit's current run from the journal and reports the
    crash (RV(state=server_died)). Bad input (no client venv, a data file that is not GSM8K, a subset of 0 or more
    questions than the data holds, a threshold outside 0..1) fails before any request (RV(state=error)).
  - Writes C(accuracy.json) (every answer and its score) and C(evaluator.log) in O(output_dir).
version_added: "0.1.0"
author: moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.IDEMPOTENT
options:
  client_python:
    description: Interpreter of the benchmark client venv (sglang 0.5.9 without torch, the sglang_env role's client).
    type: path
    default: /opt/moesweep/venvs/client/bin/python
  host:
    description: Address of the server.
    type: str
    default: 127.0.0.1
  port:
    description: Server port.
    type: int
    default: 30000
  api_key:
    description: The server's C(--api-key), given to the evaluator through its environment.
    type: str
  data_path:
    description: The GSM8K test split on the host (the repository's C(data/gsm8k/test.jsonl), copied there).
    type: path
    required: true
  num_questions:
    description: Questions asked - the data's first ones, as the evaluator takes them. At least 1.
    type: int
    default: 200
  num_shots:
    description: Worked examples before each question (the evaluator's C(--num-shots)).
    type: int
    default: 5
  max_new_tokens:
    description: Tokens one answer may take (the evaluator's C(--max-new-tokens)).
    type: int
    default: 512
  parallel:
    description: Questions in flight at once (the evaluator's C(--parallel)).
    type: int
    default: 128
  threshold:
    description: Share of correct answers below which the verdict is RV(state=bad_accuracy), within 0..1. Omitted, the accuracy is only reported.
    type: float
  examples:
    description: Wrong answers returned in RV(wrong_examples).
    type: int
    default: 5
  timeout:
    description: Seconds the evaluator may take before it is stopped (RV(state=error)).
    type: float
    default: 1800
  output_dir:
    description: Directory on the host for C(accuracy.json) and C(evaluator.log) (created).
    type: path
    required: true
  unit:
    description: The systemd unit running the server, read when the evaluator finds the server gone.
    type: str
    default: sglang.service
  fail_on_bad_accuracy:
    description: Fail the task on RV(state=bad_accuracy) too.
    type: bool
    default: false
  gate_output_dir:
    description:
      - The output directory of a gated benchmark job (M(moesweep.sweep.sglang_bench) with
        O(moesweep.sweep.sglang_bench#module:gated=true)) that waits for this stage. Its gate is opened here when
        the stage ends with a verdict (RV(state=ok) or RV(state=bad_accuracy)), so the benchmark never overlaps the
        evaluator's requests. Requires O(gate_results_file).
    type: path
  gate_results_file:
    description: That job's async results file (the C(results_file) its task registered). Requires O(gate_output_dir).
    type: path
  gate_job_key:
    description: That job's O(moesweep.sweep.sglang_bench#module:job_key); only the gate of the job whose progress carries it is opened.
    type: str
attributes:
  check_mode:
    support: none
    details: It needs a running server and sends it requests; in check mode nothing is started to ask.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: It only sends requests and rewrites its own two files; the server's state does not change.
  platform:
    support: full
    platforms: posix
notes:
  - The evaluator takes the few-shot examples from the data's first lines and asks the first O(num_questions)
    questions, so the first O(num_shots) questions are asked with their own worked answer in the prompt; every
    figure sglang publishes with this evaluator is measured that way.
seealso:
  - module: moesweep.sweep.sglang_smoke
  - module: moesweep.sweep.sglang_bench
"""

EXAMPLES = r"""
- name: Accuracy on 200 GSM8K questions, bad below 0.8
  moesweep.sweep.sglang_accuracy:
    port: 8000
    data_path: /var/lib/moesweep/data/gsm8k/test.jsonl
    output_dir: /var/lib/moesweep/runs/accuracy
    threshold: 0.8
  register: accuracy
"""

RETURN = r"""
state:
  description: V(ok), V(bad_accuracy) (below O(threshold)), V(server_died) or V(error).
  returned: always
  type: str
  choices: [ok, bad_accuracy, server_died, error]
  sample: bad_accuracy
accuracy:
  description: Share of correct answers, as the evaluator printed it (null unless it ran).
  returned: always
  type: float
  sample: 0.955
invalid:
  description: Share of answers without a number.
  returned: always
  type: float
latency_s:
  description: The evaluator's wall time for all questions.
  returned: always
  type: float
output_throughput:
  description: The evaluator's output tokens per second (its own figure, at O(parallel) questions in flight).
  returned: always
  type: float
num_questions:
  description: Questions asked.
  returned: always
  type: int
correct:
  description: Correct answers (the recount).
  returned: always
  type: int
threshold:
  description: O(threshold) (null when the accuracy is only reported).
  returned: always
  type: float
reason:
  description: The verdict in words.
  returned: always
  type: str
wrong_examples:
  description: The first wrong answers - C(index), C(question), C(label), C(value) (null when invalid), C(answer).
  returned: always
  type: list
  elements: dict
command:
  description: The evaluator's equivalent command line (the API key is not on it).
  returned: always
  type: str
crash:
  description: For RV(state=server_died) - the classifier's verdict on the unit's current run.
  returned: always
  type: dict
gate_opened:
  description: Whether the gate of the job in O(gate_output_dir) was opened here.
  returned: always
  type: bool
elapsed:
  description: Seconds the stage took.
  returned: always
  type: float
msg:
  description: One-line summary.
  returned: always
  type: str
"""

import json
import os
import shlex
import signal
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import bench_progress, gsm8k, readiness, systemd

try:
    from urllib.request import urlopen
except ImportError:  # pragma: no cover
    raise


def _server_answers(base, timeout=5):
    """Whether anything answers HTTP on the server's port (a 401 answers too)."""
    try:
        urlopen(base + "/ping", timeout=timeout).read()
        return True
    except Exception as exc:  # noqa: BLE001 - any HTTP status is an answer; a refused connection is not
        return getattr(exc, "code", None) is not None


def _write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            client_python=dict(type="path", default="/opt/moesweep/venvs/client/bin/python"),
            host=dict(type="str", default="127.0.0.1"),
            port=dict(type="int", default=30000),
            api_key=dict(type="str", no_log=True),
            data_path=dict(type="path", required=True),
            num_questions=dict(type="int", default=gsm8k.DEFAULT_QUESTIONS),
            num_shots=dict(type="int", default=gsm8k.DEFAULT_SHOTS),
            max_new_tokens=dict(type="int", default=gsm8k.DEFAULT_MAX_NEW_TOKENS),
            parallel=dict(type="int", default=gsm8k.DEFAULT_PARALLEL),
            threshold=dict(type="float"),
            examples=dict(type="int", default=5),
            timeout=dict(type="float", default=1800.0),
            output_dir=dict(type="path", required=True),
            unit=dict(type="str", default="sglang.service"),
            fail_on_bad_accuracy=dict(type="bool", default=False),
            gate_output_dir=dict(type="path"),
            gate_results_file=dict(type="path"),
            gate_job_key=dict(type="str", no_log=False),
        ),
        required_together=[("gate_output_dir", "gate_results_file")],
        supports_check_mode=False,
    )
    p = module.params
    started = time.monotonic()
    result = dict(state="error", accuracy=None, invalid=None, latency_s=None, output_throughput=None,
                  num_questions=p["num_questions"], correct=None, threshold=p["threshold"], reason="",
                  wrong_examples=[], command="", crash={}, gate_opened=False, elapsed=0.0)

    def finish(state, msg, **extra):
        result.update(extra, state=state, msg=msg, elapsed=round(time.monotonic() - started, 3))
        if state in ("ok", "bad_accuracy") and p["gate_output_dir"]:
            try:
                result["gate_opened"] = bench_progress.BenchDir(p["gate_output_dir"]).open_gate(
                    p["gate_results_file"], time.time(), key=p["gate_job_key"])
            except (IOError, OSError) as exc:
                module.warn("the benchmark's gate could not be opened here (%s): the next task opens it" % exc)
        if state in ("error", "server_died") or (state == "bad_accuracy" and p["fail_on_bad_accuracy"]):
            module.fail_json(**result)
        module.exit_json(changed=False, **result)

    # ---- bad input, before any request
    if p["max_new_tokens"] <= 0 or p["parallel"] <= 0 or p["timeout"] <= 0 or p["examples"] < 0:
        finish("error", "sglang_accuracy: max_new_tokens, parallel and timeout must be > 0 and examples >= 0")
    unit, err = systemd.validate_unit(p["unit"])
    if err:
        finish("error", err)
    try:
        with open(p["data_path"], encoding="utf-8") as fh:
            rows = gsm8k.read_lines(fh.read())
        gsm8k.check_inputs(p["num_questions"], p["num_shots"], len(rows), p["threshold"])
        expected = gsm8k.labels(rows, p["num_questions"])
    except (IOError, OSError) as exc:
        finish("error", "sglang_accuracy: cannot read the GSM8K data %s (%s): copy the repository's "
                        "data/gsm8k/test.jsonl there" % (p["data_path"], exc))
    except gsm8k.AccuracyInputError as exc:
        finish("error", "sglang_accuracy: %s" % exc)
    if not os.access(p["client_python"], os.X_OK):
        finish("error", "sglang_accuracy: the benchmark client %s does not exist: provision the host with site.yml "
                        "(sglang_env_client_enabled) or set client_python" % p["client_python"])
    try:
        os.makedirs(p["output_dir"], exist_ok=True)
    except OSError as exc:
        finish("error", "sglang_accuracy: cannot create output_dir %s: %s" % (p["output_dir"], exc))
    host = "[%s]" % p["host"] if ":" in p["host"] and not p["host"].startswith("[") else p["host"]
    args = gsm8k.evaluator_args(p["data_path"], p["num_questions"], p["num_shots"], p["max_new_tokens"],
                                p["parallel"], host, p["port"])
    result["command"] = " ".join(shlex.quote(a) for a in
                                 [p["client_python"], "-m", "sglang.test.few_shot_gsm8k"] + args)
    answers_path = os.path.join(p["output_dir"], "answers.json")
    log_path = os.path.join(p["output_dir"], "evaluator.log")
    for path in (answers_path, os.path.join(p["output_dir"], "accuracy.json")):
        if os.path.exists(path):
            os.unlink(path)  # never read an earlier run's answers as this one's
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if p["api_key"]:
        env["MOESWEEP_ACCURACY_API_KEY"] = p["api_key"]

    # ---- the evaluator (its cwd is output_dir: it writes tmp_output_gsm8k.txt there)
    with open(log_path, "w") as log:
        proc = subprocess.Popen([p["client_python"], "-c", gsm8k.DRIVER_SOURCE, answers_path] + args,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=p["output_dir"], start_new_session=True)
        try:
            rc = proc.wait(timeout=p["timeout"])
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            finish("error", "sglang_accuracy: the evaluator took more than %.0f s (timeout): raise timeout or ask "
                            "fewer questions; its log is %s" % (p["timeout"], log_path))
    with open(log_path, errors="replace") as fh:
        text = fh.read()
    tail = "\n".join(text.replace("\r", "\n").splitlines()[-12:])
    if rc != 0:
        base = "http://%s:%d" % (host, p["port"])
        if not _server_answers(base):
            crash = {}
            journalctl, systemctl = module.get_bin_path("journalctl"), module.get_bin_path("systemctl")
            if journalctl and systemctl:
                time.sleep(readiness.CRASH_GRACE)  # let the dying server write its traceback
                entries, props = readiness.read_run(module.run_command, journalctl, systemctl, unit)
                crash = readiness.judge_entries(entries, props)
            line = crash.get("decisive_line")
            finish("server_died", "the server stopped answering during the accuracy stage%s"
                   % (": %s" % line if line else ""), crash=crash, reason=tail)
        finish("error", "sglang_accuracy: the evaluator failed (exit %s): %s" % (rc, tail[-600:]), reason=tail)
    figures = gsm8k.parse_figures(text)
    try:
        with open(answers_path) as fh:
            seen = json.load(fh)
    except (IOError, OSError, ValueError) as exc:
        finish("error", "sglang_accuracy: the evaluator left no answers (%s): %s" % (exc, tail[-600:]))
    answers = [a if isinstance(a, str) else "" for a in seen.get("answers") or []]
    scored = gsm8k.score(answers, expected)
    problems = gsm8k.extraction_problems(scored, figures, p["num_questions"], seen.get("values"))
    if problems:
        finish("error", "sglang_accuracy: the recount of the evaluator's answers disagrees with its report (%s): "
                        "the client venv's sglang extracts answers differently from sglang 0.5.9's few_shot_gsm8k"
                        % "; ".join(problems), **figures)
    state, reason = gsm8k.verdict(figures["accuracy"], p["threshold"])
    correct = sum(1 for s in scored if s["correct"])
    examples = gsm8k.wrong_examples(scored, rows, answers, p["examples"])
    try:
        _write_json(os.path.join(p["output_dir"], "accuracy.json"), {
            "accuracy": figures.get("accuracy"), "invalid": figures.get("invalid"), "threshold": p["threshold"],
            "num_questions": p["num_questions"], "num_shots": p["num_shots"], "command": result["command"],
            "answers": [dict(s, answer=a, finish_reason=f) for s, a, f in
                        zip(scored, answers, seen.get("finish") or [None] * len(answers))]})  # noqa: B905
    except (IOError, OSError) as exc:
        module.warn("could not write accuracy.json in %s: %s" % (p["output_dir"], exc))
    finish(state, "%s: %d of %d GSM8K answers correct" % (reason, correct, p["num_questions"]),
           correct=correct, reason=reason, wrong_examples=examples, **figures)


if __name__ == "__main__":
    main()
