"""The simulated scheduler's prefill batches: which prompt tokens each takes, as sglang's PrefillAdder admits them
(--chunked-prefill-size, --max-prefill-tokens, --max-running-requests), and what that does to a closed loop's
cohort: its prefill split into batches, its first tokens staggered, its decode together."""

from __future__ import annotations

import time

import pytest
from moesweep_sim import engine
from moesweep_sim.engine import prefill_admission


def batches(prompts, max_prefill=16384, chunk=8192, room=1 << 30, cap_with_chunking=True):
    """Every prefill batch a queue of ``prompts`` gets when nothing else runs: [(chunked part, [admitted])]."""
    waiting, chunked_left, out = list(prompts), None, []
    while waiting or chunked_left:
        part, admitted, now_chunked = prefill_admission(chunked_left, waiting, room, max_prefill, chunk,
                                                        cap_with_chunking)
        out.append((part, admitted))
        left = chunked_left - part if part is not None else 0
        done = len(admitted)
        if now_chunked:
            chunked_left = waiting[done - 1] - admitted[-1]
        else:
            chunked_left = left or None
        waiting = waiting[done:]
    return out


def test_a_cohort_of_64_prompts_of_1024_tokens_prefills_8_at_a_time_under_the_default_chunk_of_8192():
    # 0.5.9: after 7 requests 1024 tokens of the chunk are left; the 8th fits it exactly and empties it
    got = batches([1024] * 64)
    assert got == [(None, [1024] * 8)] * 8


def test_0_5_9_caps_a_batch_at_max_prefill_tokens_even_with_a_larger_chunk_and_0_5_23_only_without_chunking():
    # 0.5.9 add_one_req: a request that would reach the remaining input budget waits (>=), chunking or not
    assert batches([1024] * 32, chunk=32768)[0] == (None, [1024] * 15)
    # 0.5.23 _select_prefill_admission: with chunking the input budget stops the batch only once it is spent
    assert batches([1024] * 32, chunk=32768, cap_with_chunking=False)[0] == (None, [1024] * 16)
    # without chunking both cap it, and the first request may exceed the cap on its own
    assert batches([1024] * 32, chunk=None)[0] == (None, [1024] * 15)
    assert batches([40000, 1024], chunk=None) == [(None, [40000]), (None, [1024])]


def test_a_prompt_longer_than_the_chunk_is_prefilled_chunk_by_chunk_and_the_last_chunk_shares_its_batch():
    got = batches([20000, 1024, 1024])
    assert got == [(None, [8192]), (8192, []), (3616, [1024, 1024])]


def test_a_batch_takes_no_more_requests_than_may_run():
    assert prefill_admission(None, [100] * 10, 3, 16384, 8192, True) == (None, [100] * 3, False)
    assert prefill_admission(None, [100] * 10, 0, 16384, 8192, True) == (None, [], False)


class _Log:
    def __init__(self):
        self.lines = []

    def __call__(self, kind, **fields):
        self.lines.append((kind, fields))


@pytest.fixture
def fast_engine(monkeypatch):
    monkeypatch.setattr(engine.tokenmodel, "params", lambda backend, gpu: (2000.0, 0.0, 4.0e6))
    made = []

    def make(**kw):
        log = _Log()
        e = engine.Engine("auto", "rtx-pro-6000", kw.pop("max_running", 64), 10 ** 7, 1000, log, **kw)
        e.start()
        made.append(e)
        return e, log

    yield make
    for e in made:
        with e.cond:
            e.stop = True
            e.cond.notify_all()


def run_requests(e, prompts, max_new=4):
    reqs = [engine.Req(p, max_new, True, f"seed{i}") for i, p in enumerate(prompts)]
    for r in reqs:
        e.submit(r)
    deadline = time.monotonic() + 30
    while any(r.finished_time is None for r in reqs):
        assert time.monotonic() < deadline, "the simulated engine did not finish the requests"
        time.sleep(0.01)
    return reqs


def test_the_engine_logs_the_cohorts_prefill_in_chunk_sized_batches_and_staggers_its_first_tokens(fast_engine):
    e, log = fast_engine(chunked_prefill_size=8192, max_prefill_tokens=16384)
    with e.cond:  # the whole cohort waits before the loop looks, as a closed loop's cohort arrives together
        reqs = [engine.Req(1024, 4, True, f"seed{i}") for i in range(64)]
        for r in reqs:
            e.submit(r)
    deadline = time.monotonic() + 30
    while any(r.finished_time is None for r in reqs):
        assert time.monotonic() < deadline, "the simulated engine did not finish the requests"
        time.sleep(0.01)
    prefills = [f for kind, f in log.lines if kind == "prefill"]
    assert [(f["new_seq"], f["new_tok"]) for f in prefills] == [(8, 8192)] * 8
    assert [f["queue"] for f in prefills] == [56, 48, 40, 32, 24, 16, 8, 0]
    firsts = sorted({r.prefill_end for r in reqs})
    assert len(firsts) == 8  # one first-token time per prefill batch
    assert {r.finish_reason["type"] for r in reqs} == {"length"}


def test_a_long_prompt_emits_its_first_token_after_its_last_chunk(fast_engine):
    e, log = fast_engine(chunked_prefill_size=8192, max_prefill_tokens=16384)
    (r,) = run_requests(e, [20000])
    prefills = [f for kind, f in log.lines if kind == "prefill"]
    assert [f["new_tok"] for f in prefills] == [8192, 8192, 3616]
    assert len(r.out_ids) == 4 and r.prefilled == 20000
