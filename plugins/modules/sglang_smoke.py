#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_smoke
short_description: Check that a ready SGLang server generates text, not garbage
description:
  - Runs on the target, right after readiness. Sends a few fixed prompts with greedy sampling
    (C(temperature=0)) through the native C(/generate) endpoint, one streamed C(/generate), one
    C(/v1/chat/completions) request and, when asked, C(/v1/completions). The requests are sent at once (the
    server batches them as it would any concurrent clients), so the check takes about one answer's time; the
    answers keep the order of the requests.
  - Checks every answer for non-empty text, a finish reason and a completion token count, and for the garbage
    signatures of broken kernels - one token repeated, a run of C(!) (NaN logits), only punctuation or
    replacement characters, streamed chunks that add no text.
  - Optionally compares the answers with the texts another backend produced for the same prompts on the same
    model and sglang version (O(reference), from an earlier point's record) and reports their token agreement.
  - When a request fails because the server died, reads the unit's current run from the journal and reports
    the crash (cause, phase, decisive line) instead of a connection error.
  - Returns RV(state=ok), RV(state=bad_output) (with the texts in RV(answers)), RV(state=server_died) (with
    RV(crash)) or RV(state=error); the task fails unless RV(state=ok), or with O(fail_on_error=false) it
    returns the state to branch on.
version_added: "0.1.0"
author: moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.IDEMPOTENT
options:
  host:
    description: Address of the server.
    type: str
    default: 127.0.0.1
  port:
    description: Server port.
    type: int
    default: 30000
  api_key:
    description: The server's C(--api-key), sent as a Bearer token.
    type: str
  model:
    description: Model name for the OpenAI endpoints. Empty asks C(/v1/models).
    type: str
  prompts:
    description: Prompts sent to C(/generate), one request each.
    type: list
    elements: str
    default: ["The capital of France is", "List the first five prime numbers:", "Write one sentence about the ocean."]
  chat_prompt:
    description: The prompt of the C(/v1/chat/completions) request.
    type: str
    default: Name three primary colors.
  endpoints:
    description: Which endpoints to check.
    type: list
    elements: str
    choices: [generate, generate_stream, chat, completions]
    default: [generate, generate_stream, chat]
  max_new_tokens:
    description: Tokens generated per request. Must be greater than 0.
    type: int
    default: 32
  request_timeout:
    description: Seconds one request may take. Must be greater than 0.
    type: float
    default: 300
  reference:
    description:
      - Answers of another point for the same prompts (its record's C(smoke.answers)), a list of
        C({prompt, text, token_ids}). The result then carries the agreement per prompt.
    type: list
    elements: dict
    default: []
  min_agreement:
    description: When set, an agreement share below it is a failed check (RV(state=bad_output)).
    type: float
  unit:
    description: The systemd unit running the server, read when a request finds the server gone.
    type: str
    default: sglang.service
  fail_on_error:
    description: Fail the task unless RV(state=ok).
    type: bool
    default: true
  gate_output_dir:
    description:
      - The output directory of a gated benchmark job (M(moesweep.sweep.sglang_bench) with
        O(moesweep.sweep.sglang_bench#module:gated=true)) that waits for this check. When the check passes, its gate
        is opened here on the host, the moment the answers are judged, instead of by the next task (which still
        opens it, harmlessly). The gate stays shut when the check fails.
      - Requires O(gate_results_file).
    type: path
  gate_results_file:
    description:
      - That job's async results file (the C(results_file) its task registered), so that progress left in
        O(gate_output_dir) by an earlier run never counts as the job's.
      - Requires O(gate_output_dir).
    type: path
  gate_job_key:
    description:
      - That job's O(moesweep.sweep.sglang_bench#module:job_key). Only the gate of the job whose progress carries
        it is opened (never a later job's in the same directory).
    type: str
attributes:
  check_mode:
    support: none
    details: It needs a running server and sends it requests; in check mode nothing is started to ask.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: It only sends requests; the server's state does not change.
  platform:
    support: full
    platforms: posix
notes:
  - Nothing on the host changes; the server generates a few hundred tokens.
seealso:
  - module: moesweep.sweep.sglang_ready
  - module: moesweep.sweep.sglang_bench
"""

EXAMPLES = r"""
- name: Check the output of the freshly started server
  moesweep.sweep.sglang_smoke:
    port: 8000
    max_new_tokens: 32
  register: smoke

- name: Compare with the answers another backend gave
  moesweep.sweep.sglang_smoke:
    port: 8000
    reference: "{{ earlier_record.smoke.answers }}"
    fail_on_error: false
"""

RETURN = r"""
gate_opened:
  description: Whether the check passed and opened the gate of the job in O(gate_output_dir).
  returned: always
  type: bool
  sample: true
state:
  description: V(ok), V(bad_output), V(server_died) or V(error) (bad input, or no server to ask).
  returned: always
  type: str
  choices: [ok, bad_output, server_died, error]
  sample: bad_output
answers:
  description: Every answer, with C(endpoint), C(prompt), C(text), C(token_ids), C(finish_reason), C(completion_tokens), C(problems).
  returned: always
  type: list
  elements: dict
  sample: [{"endpoint": "generate", "prompt": "The capital of France is", "text": " Paris.", "finish_reason": "stop"}]
reasons:
  description: Why the output is bad (one line per problem).
  returned: always
  type: list
  elements: str
  sample: ["generate 'The capital of France is': a run of 8 or more '!' (the NaN-logits signature)"]
agreement:
  description: Agreement with O(reference) per prompt - C(prefix), C(matched), C(compared), C(share), C(unit).
  returned: always
  type: list
  elements: dict
model:
  description: The model name used for the OpenAI endpoints.
  returned: always
  type: str
crash:
  description: For RV(state=server_died) - the classifier's verdict on the unit's current run (state, cause, phase, decisive_line, unit_state).
  returned: always
  type: dict
elapsed:
  description: Seconds the checks took.
  returned: always
  type: float
msg:
  description: One-line summary.
  returned: always
  type: str
"""

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import bench_progress, readiness, smoke, systemd

try:
    from http.client import HTTPException
    from urllib.error import HTTPError, URLError
    from urllib.request import Request, urlopen
except ImportError:  # pragma: no cover
    raise


class ServerGone(Exception):
    pass


def _request(url, payload, api_key, timeout):
    """POST (or GET without payload): (status, body text). Raises ServerGone when nothing answers."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    data = json.dumps(payload).encode() if payload is not None else None
    try:
        resp = urlopen(Request(url, data=data, headers=headers), timeout=timeout)
        body = resp.read().decode("utf-8", "replace")
        return resp.getcode(), body
    except HTTPError as exc:
        try:
            body = exc.read().decode("utf-8", "replace")
        except Exception:  # noqa: BLE001 - the error body is best effort
            body = ""
        if exc.code in (502, 503, 504):
            raise ServerGone("HTTP %d from %s: %s" % (exc.code, url, body[:200])) from exc
        return exc.code, body
    except (URLError, ConnectionError, socket.timeout, TimeoutError, HTTPException) as exc:
        # HTTPException: IncompleteRead when the server dies in the middle of an answer (a stream)
        raise ServerGone("%s: %s" % (url, getattr(exc, "reason", None) or exc)) from exc


def _json(body):
    try:
        return json.loads(body)
    except ValueError:
        return body


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", default="127.0.0.1"),
            port=dict(type="int", default=30000),
            api_key=dict(type="str", no_log=True),
            model=dict(type="str"),
            prompts=dict(type="list", elements="str", default=list(smoke.DEFAULT_PROMPTS)),
            chat_prompt=dict(type="str", default=smoke.DEFAULT_CHAT_PROMPT),
            endpoints=dict(type="list", elements="str", default=["generate", "generate_stream", "chat"],
                           choices=["generate", "generate_stream", "chat", "completions"]),
            max_new_tokens=dict(type="int", default=32),
            request_timeout=dict(type="float", default=300.0),
            reference=dict(type="list", elements="dict", default=[]),
            min_agreement=dict(type="float"),
            unit=dict(type="str", default="sglang.service"),
            fail_on_error=dict(type="bool", default=True),
            gate_output_dir=dict(type="path"),
            gate_results_file=dict(type="path"),
            gate_job_key=dict(type="str", no_log=False),
        ),
        required_together=[("gate_output_dir", "gate_results_file")],
        supports_check_mode=False,
    )
    p = module.params
    empty = dict(state="error", answers=[], reasons=[], agreement=[], model=None, crash={}, elapsed=0.0,
                 gate_opened=False)
    if p["max_new_tokens"] <= 0 or p["request_timeout"] <= 0:
        module.fail_json(msg="max_new_tokens and request_timeout must be greater than 0", **empty)
    if not p["prompts"] and "generate" in p["endpoints"]:
        module.fail_json(msg="prompts is empty: give at least one prompt for the generate endpoint", **empty)
    unit, err = systemd.validate_unit(p["unit"])
    if err:
        module.fail_json(msg=err, **empty)
    host = "[%s]" % p["host"] if ":" in p["host"] and not p["host"].startswith("[") else p["host"]
    base = "http://%s:%d" % (host, p["port"])
    started = time.monotonic()
    answers = []
    sampling = {"temperature": 0.0, "max_new_tokens": p["max_new_tokens"]}
    model = p["model"]
    try:
        if not model and ("chat" in p["endpoints"] or "completions" in p["endpoints"]):
            status, body = _request(base + "/v1/models", None, p["api_key"], p["request_timeout"])
            data = _json(body)
            try:
                model = data["data"][0]["id"]
            except (KeyError, IndexError, TypeError):
                module.fail_json(msg="GET /v1/models answered %s without a model id: %s" % (status, body[:200]),
                                 **empty)
        # Every request at once (the server batches them, as it would any concurrent clients): the check takes
        # about one answer's time instead of the sum of them. Answers keep the order of the requests.
        jobs = []
        if "generate" in p["endpoints"]:
            for prompt in p["prompts"]:
                jobs.append(("generate", prompt, "/generate", {"text": prompt, "sampling_params": sampling},
                             lambda body: smoke.check_generate(_json(body))))
        if "generate_stream" in p["endpoints"]:
            prompt = p["prompts"][0] if p["prompts"] else p["chat_prompt"]
            jobs.append(("generate_stream", prompt, "/generate",
                         {"text": prompt, "sampling_params": sampling, "stream": True},
                         smoke.check_generate_stream))
        if "chat" in p["endpoints"]:
            payload = {"model": model, "messages": [{"role": "user", "content": p["chat_prompt"]}],
                       "temperature": 0.0, "max_tokens": p["max_new_tokens"]}
            jobs.append(("chat", p["chat_prompt"], "/v1/chat/completions", payload,
                         lambda body: smoke.check_openai(_json(body), chat=True)))
        if "completions" in p["endpoints"]:
            prompt = p["prompts"][0] if p["prompts"] else p["chat_prompt"]
            payload = {"model": model, "prompt": prompt, "temperature": 0.0, "max_tokens": p["max_new_tokens"]}
            jobs.append(("completions", prompt, "/v1/completions", payload,
                         lambda body: smoke.check_openai(_json(body), chat=False)))

        def ask(job):
            return _request(base + job[2], job[3], p["api_key"], p["request_timeout"])

        with ThreadPoolExecutor(max_workers=max(len(jobs), 1)) as pool:
            replies = [pool.submit(ask, job) for job in jobs]
            gone = None
            for job, reply in zip(jobs, replies):  # noqa: B905 - same length; targets run Python 3.9 (no strict=)
                endpoint, prompt, _path, _payload, check_body = job
                try:
                    status, body = reply.result()
                except ServerGone as exc:
                    gone = gone or exc
                    continue
                if status == 200:
                    check = check_body(body)
                else:
                    check = {"text": None, "problems": ["HTTP %d: %s" % (status, body[:200])]}
                    if endpoint == "generate":
                        check.update(token_ids=[], finish_reason=None, completion_tokens=None)
                check.update(endpoint=endpoint, prompt=prompt)
                answers.append(check)
            if gone is not None:
                raise gone
    except ServerGone as exc:
        journalctl = module.get_bin_path("journalctl")
        systemctl = module.get_bin_path("systemctl")
        crash = {}
        if journalctl and systemctl:
            time.sleep(readiness.CRASH_GRACE)  # let the dying server write its traceback
            entries, props = readiness.read_run(module.run_command, journalctl, systemctl, unit)
            crash = readiness.judge_entries(entries, props)
        line = crash.get("decisive_line") if crash.get("state") == "crashed" else None
        msg = "the server stopped answering during the smoke check (%s)%s" % (
            exc, ": %s" % line if line else "")
        result = dict(state="server_died", answers=answers, reasons=[str(exc)], agreement=[], model=model,
                      crash=crash, gate_opened=False, elapsed=round(time.monotonic() - started, 3), msg=msg)
        if p["fail_on_error"]:
            module.fail_json(**result)
        module.exit_json(changed=False, **result)

    agreements = smoke.compare_to_reference(
        [a for a in answers if a.get("endpoint") == "generate"], p["reference"]) if p["reference"] else []
    ok, reasons = smoke.verdict(answers, agreements, p["min_agreement"])
    state = "ok" if ok else "bad_output"
    msg = ("output looks right: %d answers" % len(answers)) if ok else ("bad output: %s" % reasons[0])
    elapsed = round(time.monotonic() - started, 3)
    gate_opened = False
    if ok and p["gate_output_dir"]:
        # the benchmark's first request follows at once; the task that follows this one opens the gate too
        try:
            gate_opened = bench_progress.BenchDir(p["gate_output_dir"]).open_gate(
                p["gate_results_file"], time.time(), key=p["gate_job_key"])
        except (IOError, OSError) as exc:
            module.warn("the check passed, but the benchmark's gate could not be opened here (%s): the next task "
                        "opens it" % exc)
        msg += "; the benchmark's gate opened" if gate_opened else ""
    result = dict(state=state, answers=answers, reasons=reasons, agreement=agreements, model=model, crash={},
                  elapsed=elapsed, msg=msg, gate_opened=gate_opened)
    if not ok and p["fail_on_error"]:
        module.fail_json(**result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
