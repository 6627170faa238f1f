"""Answers to sglang's few-shot GSM8K evaluator, from the GSM8K test split the repository ships.

The evaluator (sglang 0.5.9 ``python/sglang/test/few_shot_gsm8k.py``) sends one ``/generate`` per question whose
``text`` is the k-shot examples followed by ``"Question: " + question + "\\nAnswer:"`` (``get_one_example``), greedy,
with ``stop=["Question", "Assistant:", "<|separator|>"]``; a model that follows the examples writes the worked
solution, ``#### <number>``, a blank line and the next ``Question``, where generation stops on the stop string
(finish reason ``{"type": "stop", "matched": "Question"}``, the stop string trimmed from the text:
``srt/managers/schedule_batch.py`` ``Req.check_finished`` / ``FINISH_MATCHED_STR``). The evaluator then takes the
last integer of the text (``get_answer_value``).

So a healthy simulated backend answers a shipped question with that question's own solution from the data, followed
by ``"\\n\\n"``. Under the fault ``low_accuracy[:RATE][@BACKEND]`` (default rate 0.3, every backend when none is
named) a deterministic share RATE of the questions (those whose sha256 falls below RATE) gets the same solution with a
wrong final number: what a kernel that computes slightly wrongly looks like to the evaluator, an answer in the right
format with the wrong value. The simulator reads the data file itself (it shares no code with the collection).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading

from . import faults

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_FILES = (
    os.environ.get("MOESWEEP_SIM_GSM8K", ""),
    "/opt/moesweep-sim/data/gsm8k/test.jsonl",
    os.path.join(os.path.dirname(os.path.dirname(HERE)), "data", "gsm8k", "test.jsonl"),  # <repo>/data/gsm8k
)
DEFAULT_RATE = 0.3
QUESTION = "Question: "
ANSWER = "\nAnswer:"
STOP = "Question"  # the first of the evaluator's stop strings, the one the next few-shot block starts with
_PIECE = re.compile(r"\s*\S+")
_FINAL = re.compile(r"#### (-?[\d,]+)\s*$")

_answers: dict | None = None
_loading = threading.Lock()


def _load() -> dict:
    """question -> answer of the shipped test split (empty when no file is found). Read once, by the first request
    (the evaluator's arrive together, one thread each: none may see a half-read table)."""
    global _answers
    with _loading:
        if _answers is None:
            table = {}
            for path in DATA_FILES:
                if path and os.path.isfile(path):
                    with open(path, encoding="utf-8") as fh:
                        for line in fh:
                            if line.strip() and not line.startswith("#"):  # sglang.utils.read_jsonl skips '#' lines
                                row = json.loads(line)
                                table[row["question"]] = row["answer"]
                    break
            _answers = table
    return _answers


def question_of(prompt: str) -> str | None:
    """The question a few-shot GSM8K prompt asks (its last ``Question: ...\\nAnswer:``), or None."""
    if not prompt.endswith(ANSWER):
        return None
    start = prompt.rfind(QUESTION)
    if start < 0:
        return None
    return prompt[start + len(QUESTION):-len(ANSWER)]


def low_accuracy(backend: str) -> float | None:
    """The share of wrong answers the fault asks of ``backend`` now, or None when the fault is not on for it."""
    raw = faults._raw()
    spec, _, only = raw.partition("@")
    name, arg = faults.parse(spec)
    if name != "low_accuracy" or (only and only.strip() != backend):
        return None
    try:
        rate = float(arg) if arg else DEFAULT_RATE
    except ValueError:
        rate = DEFAULT_RATE
    return min(1.0, max(0.0, rate))


def is_wrong(question: str, rate: float) -> bool:
    """Whether the question is among the share ``rate`` answered wrongly (fixed per question, as greedy is)."""
    h = int(hashlib.sha256(question.encode("utf-8")).hexdigest()[:8], 16)
    return h / float(1 << 32) < rate


def wrong(answer: str) -> str:
    """The same solution with a wrong final number (the label plus 1 to 9, fixed per answer)."""
    m = _FINAL.search(answer)
    if not m:
        return answer + " 0"
    value = int(m.group(1).replace(",", ""))
    delta = 1 + int(hashlib.sha256(answer.encode("utf-8")).hexdigest()[:4], 16) % 9
    return answer[:m.start(1)] + str(value + delta)


def script(prompt: str, backend: str) -> list[str] | None:
    """The text pieces (one per simulated token) a backend writes for a shipped few-shot GSM8K prompt, or None
    when the prompt is not one."""
    question = question_of(prompt)
    if question is None:
        return None
    answer = _load().get(question)
    if answer is None:
        return None
    rate = low_accuracy(backend)
    if rate is not None and is_wrong(question, rate):
        answer = wrong(answer)
    text = " " + answer + "\n\n"
    pieces = _PIECE.findall(text)
    pieces[-1] += text[len("".join(pieces)):]  # the trailing blank line belongs to the last token
    return pieces
