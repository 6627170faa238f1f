"""bench_stats: the steady-state throughput and its interval, percentile intervals, sizing and the tie rule."""

import json
import math
import random

import pytest
from ansible_collections.moesweep.sweep.plugins.module_utils import bench_stats as bst

from tests.helpers.paths import FIXTURES


def closed_loop(concurrency, requests, output_len, step_s, prefill_s, jitter=0.0, seed=1):
    """bench_serving's detail of a closed loop of fixed lengths where every cohort of ``concurrency`` requests
    prefills together (``prefill_s``) and decodes ``output_len - 1`` steps of ``step_s``; ``jitter`` the relative
    spread of each step."""
    rng = random.Random(seed)
    ttfts, itls = [], []
    for _ in range(requests):
        ttfts.append(prefill_s)
        itls.append([step_s * (1.0 + rng.uniform(-jitter, jitter)) for _ in range(output_len - 1)])
    return {"ttfts": ttfts, "itls": itls, "output_lens": [output_len] * requests, "errors": [""] * requests}


def expected(concurrency, output_len, step_s, prefill_s):
    return concurrency * output_len / (prefill_s + (output_len - 1) * step_s)


def test_timeline_follows_the_clients_first_in_first_out_slots():
    detail = {"ttfts": [1.0, 2.0, 0.5, 0.5], "itls": [[1.0], [], [], []]}
    spans = bst.timeline(detail["ttfts"], detail["itls"], 2)
    # 0 and 1 start at once; 2 takes the slot freed first (request 0 at 2.0 s), 3 the next (request 1 at 2.0 s too)
    assert spans == [(0.0, 2.0), (0.0, 2.0), (2.0, 2.5), (2.0, 2.5)]


def test_steady_requests_leave_out_the_drain():
    # c2: request 0 is short, so requests 1..3 overlap the drain of request 2's slot after the last start
    spans = [(0.0, 1.0), (0.0, 3.0), (1.0, 2.0), (2.0, 5.0)]
    # last start 2.0; first end after it 3.0 (request 1); request 3 ends at 5.0, in the drain
    assert bst.steady_requests(spans) == [0, 1, 2]


def test_steady_throughput_is_the_token_models_closed_loop_rate():
    d = closed_loop(8, 40, 64, 0.03, 0.2)
    thr = bst.steady_throughput([d], 8)
    assert thr["value"] == pytest.approx(expected(8, 64, 0.03, 0.2), rel=1e-9)
    assert thr["steady_requests"] == 40 and thr["requests"] == 40 and thr["batches"] >= bst.MIN_BATCHES
    # a server without noise: the batch means agree, and the interval is the GPU drift's alone
    assert thr["half_width_batches"] == pytest.approx(0.0, abs=1e-6)
    span = 40 * (0.2 + 63 * 0.03) / 8
    assert thr["drift"]["span_s"] == pytest.approx(span)
    assert thr["half_width"] == pytest.approx(bst.Z95 * bst.drift_se_rel(span) * thr["value"], rel=1e-6)
    assert thr["method"] == "batch means + GPU drift"
    off = bst.steady_throughput([d], 8, drift_cv=0)
    assert off["half_width"] == pytest.approx(0.0, abs=1e-6) and off["method"] == "batch means"


def test_drift_se_is_the_time_average_of_an_exponentially_correlated_process():
    # short spans keep the whole CV, long ones average it down as sqrt(2 tau / span)
    assert bst.drift_se_rel(0.0) == bst.DRIFT_CV
    assert bst.drift_se_rel(0.6) == pytest.approx(bst.DRIFT_CV, rel=0.01)
    assert bst.drift_se_rel(60.0) == pytest.approx(bst.DRIFT_CV * math.sqrt(2 * math.exp(-1)), rel=1e-9)
    assert bst.drift_se_rel(60000.0) == pytest.approx(bst.DRIFT_CV * math.sqrt(2 * 60 / 60000.0), rel=0.01)
    assert bst.drift_se_rel(300.0, cv=0) == 0.0


def test_interval_holds_the_truth_and_narrows_with_more_requests():
    truth = expected(4, 32, 0.05, 0.1)
    narrow = []
    for n in (20, 80):
        thr = bst.steady_throughput([closed_loop(4, n, 32, 0.05, 0.1, jitter=0.5, seed=n)], 4)
        assert thr["low"] <= truth <= thr["high"]
        narrow.append(thr["half_width_rel"])
    assert narrow[1] < narrow[0]


def test_no_interval_with_fewer_batches_than_the_minimum():
    thr = bst.steady_throughput([closed_loop(1, 3, 16, 0.05, 0.1)], 1)
    assert thr["value"] is not None and thr["half_width"] is None and thr["batches"] == 3


def test_rounds_pool():
    a = closed_loop(2, 6, 16, 0.05, 0.1, jitter=0.2, seed=2)
    b = closed_loop(2, 6, 16, 0.05, 0.1, jitter=0.2, seed=3)
    thr = bst.steady_throughput([a, b], 2)
    assert thr["rounds"] == 2 and thr["requests"] == 12 and thr["batches"] == 12


def test_failed_requests_are_not_counted():
    d = closed_loop(2, 10, 16, 0.05, 0.1)
    d["errors"][3] = "Bad Request"
    d["output_lens"][3] = 0
    assert bst.steady_throughput([d], 2)["steady_requests"] == 9


def test_real_bench_serving_output():
    """The real client's detail (sglang 0.5.9 against the simulator, DEFAULT_RATE 30 tok/s, alpha 0.05, prefill 5000
    tok/s, c4, 32 in / 64 out): the token model gives 104.86 tok/s; bench_serving's whole run 103.84."""
    line = (FIXTURES / "bench_serving" / "sglang-0.5.9-sim-c4.jsonl").read_text().splitlines()[-1]
    d = json.loads(line)
    thr = bst.steady_throughput([d], 4)
    assert thr["requests"] == 20 and thr["batches"] >= bst.MIN_BATCHES
    assert thr["low"] <= 104.86 <= thr["high"]
    assert abs(thr["value"] / 104.86 - 1) < 0.02
    lat = bst.latency_figures([d])
    assert lat["ttft"]["n"] == 20 and lat["tpot"]["n"] == 20 and lat["itl"]["n"] == sum(len(x) for x in d["itls"])
    assert lat["ttft"]["p50"]["value"] == pytest.approx(d["median_ttft_ms"], rel=1e-9)
    assert lat["itl"]["p99"]["value"] == pytest.approx(d["p99_itl_ms"], rel=1e-9)
    # bench_serving's TPOT uses the latency up to the last chunk (usage, [DONE]); the detail ends at the last token
    assert lat["tpot"]["p50"]["value"] == pytest.approx(d["median_tpot_ms"], rel=1e-4)


def test_percentile_interval_order_statistics():
    values = list(range(1, 101))
    iv = bst.percentile_interval(values, 50)
    assert iv["n"] == 100 and iv["low"] < 50.5 < iv["high"]
    assert (iv["low"], iv["high"]) == (40, 61)
    # p99 of 16 samples: nothing above the largest sample bounds it
    tail = bst.percentile_interval(list(range(16)), 99)
    assert tail["high"] is None and tail["low"] is not None
    assert bst.percentile_interval([], 99) == {"value": None, "low": None, "high": None, "n": 0}


def test_t95():
    assert bst.t95(4) == 2.776 and bst.t95(22) == 2.086 and bst.t95(1000) == bst.Z95


@pytest.mark.parametrize("apart, verdict", [(0.01, "tie"), (0.019, "tie"), (0.10, "higher")])
def test_compare_at_the_default_precision(apart, verdict):
    a = {"value": 100.0 * (1 + apart), "half_width": 0.1}
    b = {"value": 100.0, "half_width": 0.1}
    assert bst.compare(a, b) == verdict
    assert bst.compare(b, a) == {"higher": "lower"}.get(verdict, verdict)


def test_compare_wide_intervals_are_a_tie():
    assert bst.compare({"value": 110.0, "half_width": 8.0}, {"value": 100.0, "half_width": 8.0}) == "tie"
    assert bst.compare({"value": 110.0, "half_width": None}, {"value": 100.0, "half_width": None}) == "higher"


def test_requests_needed():
    assert bst.requests_needed({"steady_requests": 64, "half_width_rel": 0.01}, 64, 0.02, 64) == 0
    # 4 % from 64 steady requests: 256 for 2 %, 192 more, and the new round's own drain
    assert bst.requests_needed({"steady_requests": 64, "half_width_rel": 0.04}, 64, 0.02, 64) == 192 + 64
    assert bst.requests_needed({"steady_requests": 3, "half_width_rel": None}, 1, 0.02, 3) == bst.MIN_BATCHES
    # rounded up to whole cohorts of the level
    assert bst.requests_needed({"steady_requests": 3, "half_width_rel": None}, 4, 0.02, 5) == 8
    assert bst.requests_needed({"steady_requests": 8, "half_width_rel": 0.03}, 4, 0.02, 8) == 16


def test_pilot_requests():
    assert [bst.pilot_requests(c, 5) for c in (1, 4, 8, 64)] == [5, 8, 8, 64]


def test_budget_requests():
    assert bst.budget_requests(500, 64, 300.0, 700.0) == 128
    assert bst.budget_requests(500, 64, 300.0, 200.0) == 0
    assert bst.budget_requests(10, 1, 50.0, None) == 10


def test_the_interval_covers_the_truth_95_times_in_100():
    """Closed loops of 40 requests at c4 with random lengths and step times (i.i.d. requests): the 95 % interval
    holds the true rate, c x E[output tokens] / E[request time], in 90-99 % of 300 runs (the drain left out)."""
    mean_len, step, sigma = 48, 0.05, 0.3
    truth = 4 * mean_len / (0.1 + (mean_len - 1) * step * math.exp(sigma ** 2 / 2))
    covered = 0
    for seed in range(300):
        rng = random.Random(seed)
        lens = [rng.randint(32, 64) for _ in range(40)]
        steps = [step * rng.lognormvariate(0, sigma) for _ in lens]
        d = {"ttfts": [0.1] * 40, "itls": [[s] * (n - 1) for n, s in zip(lens, steps, strict=True)],
             "output_lens": lens, "errors": [""] * 40}
        thr = bst.steady_throughput([d], 4)
        covered += thr["low"] <= truth <= thr["high"]
    assert 0.90 <= covered / 300 <= 0.99
