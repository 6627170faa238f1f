# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The output smoke check: is what a freshly started server generates text at all?

Pure functions over the JSON an SGLang server returns:

* ``/generate`` (python/sglang/srt/managers/tokenizer_manager.py, v0.5.9 ``_handle_batch_output``):
  ``{"text": str, "output_ids": [int], "meta_info": {"id", "finish_reason": {"type": "length"|"stop", ...}
  or None, "prompt_tokens", "completion_tokens", "cached_tokens", ...}}``; streamed as ``data: {...}``
  server-sent events whose ``text`` is cumulative, ended by ``data: [DONE]``
  (python/sglang/srt/entrypoints/http_server.py, ``generate_request``).
* OpenAI ``/v1/chat/completions`` and ``/v1/completions`` (python/sglang/srt/entrypoints/openai/protocol.py):
  ``choices[0].message.content`` / ``choices[0].text``, ``choices[0].finish_reason``, ``usage.completion_tokens``.

Garbage signatures are those broken kernels are known to print: NaN / inf logits make greedy decoding
pick one token id again and again, which detokenizes to a run of ``!`` where ``!`` is id 0 (GPT-2 style
byte-level vocabularies; "Llama-3.1-405B-Instruct-FP8 only generates exclamation marks",
https://github.com/vllm-project/vllm/issues/13035); a broken MoE path repeats one word
("Ginh Ginh Ginh ...", https://github.com/vllm-project/vllm/issues/12015; MoE backends that "generate garbage
output", https://github.com/sgl-project/sglang/issues/10138); invalid UTF-8 byte sequences detokenize to
replacement characters; and punctuation soup.

Stdlib only; runs on the target (Python 3.9+).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import unicodedata

# Fixed prompts: short, factual, answerable by any instruction-tuned or base model in a few tokens.
DEFAULT_PROMPTS = (
    "The capital of France is",
    "List the first five prime numbers:",
    "Write one sentence about the ocean.",
)
DEFAULT_CHAT_PROMPT = "Name three primary colors."

REPLACEMENT_CHAR = u"\ufffd"
# thresholds of the signatures (a correct 32-token answer never trips them)
MIN_TOKENS_FOR_REPEAT = 8        # a repeat needs at least this many tokens to be judged
REPEAT_SHARE = 0.9               # one token id / word making up >= 90 % of the output
MAX_PHRASE_WORDS = 6             # a phrase of 2-6 words repeating with that period (degenerate loops)
BANG_RUN = 8                     # "!!!!!!!!" or longer
NON_TEXT_SHARE = 0.8             # >= 80 % punctuation / symbols / replacement characters
REPLACEMENT_SHARE = 0.2          # >= 20 % U+FFFD
EMPTY_DELTA_SHARE = 0.5          # >= half of the streamed chunks add no text


def _is_text_char(ch):
    cat = unicodedata.category(ch)
    return cat[0] in ("L", "N")  # letters and digits, in any script


def garbage_signatures(text, token_ids=None):
    """The garbage signatures ``text`` (and its token ids, when known) shows; [] for plausible text."""
    found = []
    text = text or ""
    stripped = text.strip()
    if not stripped:
        return ["empty text"]
    ids = [i for i in (token_ids or []) if isinstance(i, int)]
    if len(ids) >= MIN_TOKENS_FOR_REPEAT:
        top = max(set(ids), key=ids.count)
        share = ids.count(top) / float(len(ids))
        if share >= REPEAT_SHARE:
            found.append("one token repeated: id %d is %d of %d tokens" % (top, ids.count(top), len(ids)))
    words = stripped.split()
    if not found and len(words) >= MIN_TOKENS_FOR_REPEAT:
        top = max(set(words), key=words.count)
        share = words.count(top) / float(len(words))
        if share >= REPEAT_SHARE:
            found.append("one word repeated: %r is %d of %d words" % (top[:20], words.count(top), len(words)))
    if not found and len(words) >= 3 * MIN_TOKENS_FOR_REPEAT // 2:
        for period in range(2, MAX_PHRASE_WORDS + 1):
            same = sum(1 for i in range(period, len(words)) if words[i] == words[i - period])
            share = same / float(len(words) - period)
            if share >= REPEAT_SHARE:
                found.append("a phrase of %d words repeated: %r ..." % (period, " ".join(words[-period:])[:40]))
                break
    if "!" * BANG_RUN in text:
        found.append("a run of %d or more '!' (the NaN-logits signature)" % BANG_RUN)
    visible = [c for c in stripped if not c.isspace()]
    if visible:
        repl = sum(1 for c in visible if c == REPLACEMENT_CHAR) / float(len(visible))
        if repl >= REPLACEMENT_SHARE:
            found.append("%.0f %% replacement characters (invalid UTF-8 from the detokenizer)" % (100 * repl))
        non_text = sum(1 for c in visible if not _is_text_char(c)) / float(len(visible))
        if non_text >= NON_TEXT_SHARE and len(visible) >= 4:
            found.append("%.0f %% punctuation / symbols, almost no letters or digits" % (100 * non_text))
    return found


def _finish(meta):
    reason = (meta or {}).get("finish_reason")
    if isinstance(reason, dict):
        return reason.get("type")
    return reason


def check_generate(body):
    """One non-streamed ``/generate`` answer -> {text, token_ids, finish_reason, completion_tokens, problems}."""
    problems = []
    if not isinstance(body, dict):
        return {"text": None, "token_ids": [], "finish_reason": None, "completion_tokens": None,
                "problems": ["the answer is not a JSON object: %r" % (str(body)[:120],)]}
    meta = body.get("meta_info") or {}
    text = body.get("text")
    ids = body.get("output_ids") or []
    finish = _finish(meta)
    tokens = meta.get("completion_tokens")
    if not isinstance(text, str):
        problems.append("no 'text' in the answer")
        text = ""
    if finish is None:
        problems.append("no finish reason (meta_info.finish_reason)")
    if not isinstance(tokens, int) or tokens <= 0:
        problems.append("completion_tokens is %r" % (tokens,))
    elif ids and len(ids) != tokens:
        problems.append("completion_tokens %d but %d output ids" % (tokens, len(ids)))
    problems.extend(garbage_signatures(text, ids))
    return {"text": text, "token_ids": ids, "finish_reason": finish, "completion_tokens": tokens,
            "problems": problems}


def check_openai(body, chat):
    """One ``/v1/chat/completions`` (``chat``) or ``/v1/completions`` answer."""
    problems = []
    try:
        choice = body["choices"][0]
    except (KeyError, IndexError, TypeError):
        return {"text": None, "token_ids": [], "finish_reason": None, "completion_tokens": None,
                "problems": ["no choices in the answer: %r" % (str(body)[:160],)]}
    if chat:
        text = (choice.get("message") or {}).get("content")
        if text is None:
            # reasoning models (--reasoning-parser) answer in reasoning_content first
            text = (choice.get("message") or {}).get("reasoning_content")
    else:
        text = choice.get("text")
    finish = choice.get("finish_reason")
    tokens = (body.get("usage") or {}).get("completion_tokens")
    if not isinstance(text, str):
        problems.append("no text in choices[0]")
        text = ""
    if finish is None:
        problems.append("no finish_reason in choices[0]")
    if not isinstance(tokens, int) or tokens <= 0:
        problems.append("usage.completion_tokens is %r" % (tokens,))
    problems.extend(garbage_signatures(text))
    return {"text": text, "token_ids": [], "finish_reason": finish, "completion_tokens": tokens,
            "problems": problems}


def parse_sse(raw):
    """Server-sent events text -> list of decoded ``data:`` JSON objects, and whether ``[DONE]`` came."""
    chunks, done = [], False
    for line in (raw or "").splitlines():
        line = line.strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            done = True
            continue
        try:
            chunks.append(json.loads(payload))
        except ValueError:
            chunks.append({"_unparsed": payload[:200]})
    return chunks, done


def check_generate_stream(raw):
    """A streamed ``/generate``: cumulative texts must grow; chunks that add nothing are empty deltas."""
    chunks, done = parse_sse(raw)
    problems = []
    if not chunks:
        return {"text": "", "chunks": 0, "empty_deltas": 0, "finish_reason": None, "done": done,
                "problems": ["the stream carried no data chunks"]}
    texts = [c.get("text") if isinstance(c.get("text"), str) else "" for c in chunks]
    empty = 0
    previous = ""
    for i, text in enumerate(texts):
        last = i == len(texts) - 1
        if len(text) <= len(previous) and not last:
            empty += 1
        previous = text
    finish = _finish(chunks[-1].get("meta_info"))
    text = texts[-1]
    if not done:
        problems.append("the stream did not end with data: [DONE]")
    if finish is None:
        problems.append("the last chunk has no finish reason")
    if len(chunks) > 2 and empty / float(len(chunks) - 1) >= EMPTY_DELTA_SHARE:
        problems.append("%d of %d streamed chunks added no text" % (empty, len(chunks)))
    problems.extend(garbage_signatures(text))
    return {"text": text, "chunks": len(chunks), "empty_deltas": empty, "finish_reason": finish, "done": done,
            "problems": problems}


def agreement(tokens, reference):
    """Position-wise agreement of two greedy outputs (token ids, or words when ids are unknown):
    {prefix, matched, compared, share}. Different MoE kernels round differently, so greedy outputs of a
    correct backend agree on a long prefix and may diverge later; garbage agrees on almost nothing."""
    a, b = list(tokens or []), list(reference or [])
    n = min(len(a), len(b))
    prefix = 0
    while prefix < n and a[prefix] == b[prefix]:
        prefix += 1
    matched = sum(1 for i in range(n) if a[i] == b[i])
    compared = max(len(a), len(b))
    return {"prefix": prefix, "matched": matched, "compared": compared,
            "share": round(matched / float(compared), 4) if compared else None}


def compare_to_reference(answers, reference):
    """Agreement of each answer with the reference texts of another point (same model and sglang version).

    ``answers``: [{prompt, token_ids, text}]; ``reference``: [{prompt, token_ids, text}] or {prompt: text}.
    """
    if isinstance(reference, dict):
        reference = [{"prompt": k, "text": v} for k, v in reference.items()]
    by_prompt = {r.get("prompt"): r for r in reference or [] if isinstance(r, dict)}
    out = []
    for ans in answers:
        ref = by_prompt.get(ans.get("prompt"))
        if ref is None:
            continue
        if ans.get("token_ids") and ref.get("token_ids"):
            unit = "tokens"
            agree = agreement(ans["token_ids"], ref["token_ids"])
        else:
            unit = "words"
            agree = agreement((ans.get("text") or "").split(), (ref.get("text") or "").split())
        agree.update(prompt=ans.get("prompt"), unit=unit)
        out.append(agree)
    return out


def verdict(checks, agreements=None, min_agreement=None):
    """(ok, reasons): not ok when any check found a problem, or agreement fell below ``min_agreement``."""
    reasons = []
    for c in checks:
        for p in c.get("problems") or []:
            reasons.append("%s %r: %s" % (c.get("endpoint", "?"), (c.get("prompt") or "")[:40], p))
    if min_agreement is not None:
        for a in agreements or []:
            if a.get("share") is not None and a["share"] < min_agreement:
                reasons.append("agreement with the reference %.2f < %.2f on %r" % (
                    a["share"], min_agreement, (a.get("prompt") or "")[:40]))
    return not reasons, reasons
