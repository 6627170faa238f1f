"""The simulated server answers sglang's few-shot GSM8K evaluator from the shipped test split: right when healthy,
wrong at the configured rate under ``low_accuracy`` (for the named backend only). The prompts are built by the real
evaluator's own functions (sglang 0.5.9 wheel), and its own extraction reads the answers."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from helpers.paths import REPO
from moesweep_sim import gsm8k as sim_gsm8k
from simulator.gsm8k_evaluator import real_evaluator
from simulator.test_server import BASE, Sim

ROWS = [json.loads(line) for line in (REPO / "data" / "gsm8k" / "test.jsonl").read_text().splitlines()]


def ask(sim, prompt, max_new_tokens=512):
    body = {"text": prompt, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0,
                                                "stop": ["Question", "Assistant:", "<|separator|>"]}}
    status, data, _r = sim.req("POST", "/generate", body, timeout=60)
    assert status == 200, data
    return json.loads(data)


def prompts(ev, indices, shots=5):
    few = ev["get_few_shot_examples"](ROWS, shots)
    return [few + ev["get_one_example"](ROWS, i, False) for i in indices]


def test_a_healthy_backend_answers_every_shipped_question_right(tmp_path):
    ev = real_evaluator()
    sim = Sim(tmp_path, [*BASE, "--moe-runner-backend", "flashinfer_cutlass"],
              env={"MOESWEEP_SIM_DECODE_RATE": "400"})
    try:
        sim.wait_ready()
        # the evaluator's questions arrive together, the first ones before the server has read the data: none of
        # them may find a half-read table
        first = list(range(20))
        with ThreadPoolExecutor(len(first)) as pool:
            texts = list(pool.map(lambda p: ask(sim, p)["text"], prompts(ev, first)))
        assert [ev["get_answer_value"](t) for t in texts] == [ev["get_answer_value"](ROWS[i]["answer"]) for i in first]
        for i, prompt in zip([0, 7, 120], prompts(ev, [0, 7, 120]), strict=True):
            out = ask(sim, prompt)
            assert ev["get_answer_value"](out["text"]) == ev["get_answer_value"](ROWS[i]["answer"])
            assert out["text"] == " " + ROWS[i]["answer"] + "\n\n"  # the stop string trimmed, as sglang does
            assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": "Question"}
            assert out["meta_info"]["completion_tokens"] == len(sim_gsm8k.script(prompt, "x"))
        # the length limit comes first (schedule_batch.py check_finished)
        short = ask(sim, prompts(ev, [3])[0], max_new_tokens=4)
        assert short["meta_info"]["finish_reason"] == {"type": "length", "length": 4}
        # a prompt that is not a shipped question gets the usual words
        assert ask(sim, "Question: what is unknown?\nAnswer:", 8)["text"].startswith("w")
    finally:
        sim.stop()


def test_low_accuracy_answers_wrongly_at_its_rate_for_the_named_backend_only(tmp_path):
    ev = real_evaluator()
    indices = list(range(5, 45))
    wrong_expected = [i for i in indices if sim_gsm8k.is_wrong(ROWS[i]["question"], 0.5)]
    assert 8 <= len(wrong_expected) <= 32  # the rate holds roughly on 40 questions
    for backend, hit in (("flashinfer_cutlass", True), ("triton", False)):
        d = tmp_path / backend
        d.mkdir()
        sim = Sim(d, [*BASE, "--moe-runner-backend", backend],
                  fault="low_accuracy:0.5@flashinfer_cutlass", env={"MOESWEEP_SIM_DECODE_RATE": "400"})
        try:
            sim.wait_ready()
            wrong = []
            for i, prompt in zip(indices, prompts(ev, indices), strict=True):
                value = ev["get_answer_value"](ask(sim, prompt)["text"])
                if value != ev["get_answer_value"](ROWS[i]["answer"]):
                    assert value != -9999999  # wrong, not invalid: the answer keeps its format
                    wrong.append(i)
            assert wrong == (wrong_expected if hit else [])
        finally:
            sim.stop()


def test_questions_that_arrive_while_the_data_is_read_wait_for_all_of_it(monkeypatch):
    """The server's handler threads ask at once; the first reads the data. A slow read (each line parsed after a
    pause) must not let another thread look a question up in a half-read table."""
    import threading
    import time

    real_loads = sim_gsm8k.json.loads

    def slow_loads(text):
        time.sleep(0.0002)
        return real_loads(text)

    monkeypatch.setattr(sim_gsm8k, "_answers", None)
    monkeypatch.setattr(sim_gsm8k.json, "loads", slow_loads)
    last = ROWS[-1]
    prompt = "Question: " + last["question"] + "\nAnswer:"
    start = threading.Barrier(8)
    got = []

    def ask_one():
        start.wait()
        got.append(sim_gsm8k.script(prompt, "triton"))

    threads = [threading.Thread(target=ask_one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [sim_gsm8k.script(prompt, "triton")] * 8 and got[0] is not None
