"""The smoke check's pure functions: answers in sglang's real response shapes, garbage signatures (real garbage
quoted in public issues), streams, and agreement with another backend's answers."""

from __future__ import annotations

import json

import pytest
from ansible_collections.moesweep.sweep.plugins.module_utils import smoke
from helpers.paths import FIXTURES

GOOD = {"text": " Paris. It is the largest city in France.",
        "output_ids": [12366, 13, 1102, 374, 279, 7928, 3363, 304, 9822, 13],
        "meta_info": {"id": "a1", "finish_reason": {"type": "stop", "matched": 2}, "prompt_tokens": 6,
                      "weight_version": "default", "total_retractions": 0, "completion_tokens": 10, "cached_tokens": 0,
                      "e2e_latency": 0.21}}


def test_a_plausible_answer_passes():
    check = smoke.check_generate(GOOD)
    assert check["problems"] == [] and check["finish_reason"] == "stop" and check["completion_tokens"] == 10


@pytest.mark.parametrize("text,ids,needle", [
    ("", [], "empty text"),
    ("   \n", [], "empty text"),
    ("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!", [0] * 32, "id 0 is 32 of 32"),
    ("!!!!!!!!", [], "run of 8 or more '!'"),
    ("\ufffd\ufffd\ufffd\ufffd a", [], "replacement characters"),
    ("?.,;:!()[]{}<>--==++", [], "punctuation"),
    ("dog dog dog dog dog dog dog dog dog dog", [], "one word repeated"),
])
def test_garbage_signatures(text, ids, needle):
    found = smoke.garbage_signatures(text, ids)
    assert any(needle in f for f in found), found


@pytest.mark.parametrize("name", ["repeated-words-vllm-12015.txt", "repeated-phrase-lsglang-19.txt"])
def test_real_garbage_from_issues(name):
    text = (FIXTURES / "smoke" / name).read_text()
    words = text.split()
    # the last stretch is what a 32-token smoke answer of that server would have shown
    found = smoke.garbage_signatures(" ".join(words[-32:]))
    assert found and ("one word repeated" in found[0] or "a phrase of 4 words repeated" in found[0]), found


def test_prose_is_not_a_repeated_phrase():
    text = ("The ocean covers most of the planet, and its currents carry heat from the equator toward the poles, "
            "shaping the weather of every coast it touches.")
    assert smoke.garbage_signatures(text) == []


def test_normal_text_in_other_scripts_is_not_garbage():
    assert smoke.garbage_signatures("Paris est la capitale de la France.") == []
    assert smoke.garbage_signatures("东京是日本的首都。") == []
    assert smoke.garbage_signatures("2, 3, 5, 7, 11") == []


def test_missing_fields_are_problems():
    body = {"text": "hello world", "meta_info": {"finish_reason": None, "completion_tokens": 0}}
    problems = smoke.check_generate(body)["problems"]
    assert "no finish reason (meta_info.finish_reason)" in problems and any("completion_tokens" in p for p in problems)
    assert smoke.check_generate("Internal Server Error")["problems"]


def test_openai_shapes():
    chat = {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant",
            "content": "Red, blue and yellow."}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 9,
            "completion_tokens": 7, "total_tokens": 16}}
    assert smoke.check_openai(chat, chat=True)["problems"] == []
    comp = {"choices": [{"index": 0, "text": " Paris.", "finish_reason": "length"}], "usage": {"completion_tokens": 3}}
    assert smoke.check_openai(comp, chat=False)["text"] == " Paris."
    assert smoke.check_openai({"error": "boom"}, chat=True)["problems"][0].startswith("no choices")


def sse(texts, done=True, finish="length"):
    out = []
    for i, t in enumerate(texts):
        meta = {"finish_reason": {"type": finish} if i == len(texts) - 1 else None, "completion_tokens": i + 1}
        out.append("data: " + json.dumps({"text": t, "output_ids": [i], "meta_info": meta}) + "\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out)


def test_stream_grows_and_ends():
    check = smoke.check_generate_stream(sse(["The", "The sky", "The sky is", "The sky is blue."]))
    assert check["problems"] == [] and check["chunks"] == 4 and check["done"]


def test_stream_with_empty_deltas_and_no_done():
    check = smoke.check_generate_stream(sse(["A", "A", "A", "A", "A", "A b"], done=False))
    assert any("added no text" in p for p in check["problems"])
    assert "the stream did not end with data: [DONE]" in check["problems"]
    assert smoke.check_generate_stream("")["problems"] == ["the stream carried no data chunks"]


def test_agreement_and_reference():
    a = smoke.agreement([1, 2, 3, 4, 9, 9], [1, 2, 3, 4, 5, 6])
    assert a == {"prefix": 4, "matched": 4, "compared": 6, "share": 0.6667}
    ans = [{"prompt": "p", "token_ids": [1, 2, 3], "text": "x"}, {"prompt": "q", "text": "a b c"}]
    ref = [{"prompt": "p", "token_ids": [1, 2, 4]}, {"prompt": "q", "text": "a b d"}]
    out = smoke.compare_to_reference(ans, ref)
    assert [(o["prompt"], o["unit"], o["prefix"]) for o in out] == [("p", "tokens", 2), ("q", "words", 2)]
    ok, reasons = smoke.verdict([{"endpoint": "generate", "prompt": "p", "problems": []}], out, min_agreement=0.9)
    assert not ok and "agreement with the reference 0.67 < 0.90" in reasons[0]
    assert smoke.verdict([{"problems": []}])[0]
