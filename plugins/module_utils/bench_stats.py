# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""How precise a benchmark level's figures are: the steady-state output throughput with its 95 % interval, the
latency percentiles with their sample counts and intervals, how many requests a level needs for a target precision,
and whether two figures can be told apart.

Input: bench_serving's per-request detail (``--output-details``) of sglang v0.5.9: ``ttfts`` (s), ``itls`` (a list of
seconds per request, one per streamed chunk after the first), ``output_lens``, ``errors``, in the order the requests
were made (python/sglang/bench_serving.py ``result_details``). It holds no start times. They follow from how the
client schedules a closed loop: ``benchmark()`` creates one task per request in order, each waits on one
``asyncio.Semaphore(max_concurrency)`` (``limited_request_func``), and asyncio's semaphore wakes its waiters first in,
first out, so request ``k`` starts when the earliest-ending running request ends; a request's duration is its
``ttft`` plus its ``itls`` (the client's ``latency`` minus the final chunk's gap).

Steady-state throughput (``steady_throughput``): the rate at which the server produces output tokens while every
``max_concurrency`` slot is busy. The drain (after the last request started, slots empty one by one and the server
runs fewer requests, faster each) is left out: a request counts when it ended before the first slot went idle.
Every slot of a closed loop is a renewal process (a request, then the next), so by the renewal-reward theorem
(Little's law) the rate is ``concurrency * sum(output tokens) / sum(durations)`` over those requests. This is the
same quantity as the token model's closed-loop throughput; bench_serving's ``output_throughput`` divides by the
whole run instead (ramp-up, drain, the client's gaps included), and stays beside it, for parity with published runs.

Its interval: batch means, not an i.i.d. bootstrap. Requests that share the server at the same time are not
independent (one prefill burst slows all of them), so resampling single requests understates the spread. Batches of
consecutive requests (start order) keep neighbours together; the batch size is doubled while the batch means'
lag-1 autocorrelation is significant (above ``2 / sqrt(batches)``), the usual batch-means check (Law and Kelton,
Simulation Modeling and Analysis, ch. 9.5.3). The interval is Student's t on the batch means, at least
``MIN_BATCHES`` of them; a round (one bench_serving run) contributes its own batches, so repetitions pool.

What batch means do not see: a closed loop of fixed lengths runs in cohorts (the requests that start together
prefill together and end together), and a level of one cohort - a sized level's pilot at c >= 5 - has no second
cohort to compare with: the spread of its batch means is the spread within the cohort, near zero on a regular
server. What the next cohort would see differently on real hardware is the GPU itself: at its power cap a card's
forward step wanders (clocks, temperature), correlated over about a minute. Measured on an H100 at its 700 W cap
(bench/device/step_drift.py; bench/device/results/step-drift-h100-x1-20261207/): a decode-like step's time varies
by CV 0.29 % between 10, 30 and 60 s windows, lag-1 0.87 at 10 s and none at 60 s, 20-46 times the standard error
from inside one window. The interval adds that drift as a second, independent term (``drift_se_rel``): an
exponentially correlated process of stationary CV ``DRIFT_CV`` and correlation time ``DRIFT_TAU_S`` averaged over
the level's steady span leaves a relative standard error ``cv * sqrt(2 (u - 1 + e^-u) / u^2)``, ``u = span / tau``
(the variance of a time average of an Ornstein-Uhlenbeck process). A level long enough that its batch means span
several minutes already holds some of the drift in their spread, so adding it again is conservative. One card, one
run: a PCIe card at a lower cap may wander more; ``repetitions`` (more rounds, other cohorts, pooled) measure it.
Offsets that shift a whole run (another restart, a loaded host, the client's per-request HTTP time) stay outside
the interval; the comparison's precision floor (below) keeps them from ordering two points.

Percentiles (``percentile_interval``): the distribution-free interval of a quantile from order statistics (the
binomial ranks around ``n * p``, normal approximation); where the sample cannot bound a side (p99 of 16 samples) that
side is None. ITLs of one request are not independent; their interval is the same order-statistic one, stated with
its sample count.

Comparison (``compare``): two figures differ when the 95 % interval of their difference excludes 0 AND the difference
exceeds the precision target: the sweep was sized to resolve the target, not less, and run-to-run variance (another
restart) that one run's interval does not see is of that order. Anything else is a tie.

Stdlib only; runs on the target (Python 3.9+).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import heapq
import math

CONFIDENCE = 0.95
Z95 = 1.959964
MIN_BATCHES = 5
MAX_BATCHES = 20
DEFAULT_PRECISION = 0.02
# The GPU's step-time drift (module docstring): measured CV and correlation time, rounded up.
DRIFT_CV = 0.003
DRIFT_TAU_S = 60.0
PERCENTILES = (50, 90, 99)

# Student's t, two-sided 95 %, by degrees of freedom (beyond the table the nearest smaller entry, conservative).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
        20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


def t95(df):
    """Student's t quantile for a two-sided 95 % interval with ``df`` degrees of freedom."""
    if df < 1:
        return float("inf")
    best = None
    for k in sorted(_T95):
        if k <= df:
            best = _T95[k]
    return best if df <= 120 else Z95


def timeline(ttfts, itls, concurrency, ok=None):
    """[(start, end)] of each request in seconds from the level's first start, reconstructed from the client's
    first-in first-out slots (module docstring). ``ok``: per-request success flags (failed requests hold their
    slot for no measured time)."""
    c = max(1, int(concurrency))
    free = [0.0] * c
    heapq.heapify(free)
    out = []
    for i, ttft in enumerate(ttfts):
        good = ok is None or ok[i]
        gaps = itls[i] if i < len(itls) and itls[i] else []
        duration = (float(ttft or 0.0) + sum(float(g) for g in gaps)) if good else 0.0
        start = heapq.heappop(free)
        end = start + duration
        heapq.heappush(free, end)
        out.append((start, end))
    return out


def _median(values):
    s = sorted(values)
    n = len(s)
    if not n:
        return None
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def steady_requests(spans, itls=None):
    """Indices of the requests that ran while every slot was busy: those that ended by the first end after the last
    start (the drain's first idle slot), with a tolerance of two median inter-token gaps for requests that finished
    in the same step (a closed loop of fixed lengths ends whole cohorts together)."""
    if not spans:
        return []
    last_start = max(s for s, _e in spans)
    later = [e for _s, e in spans if e > last_start]
    if not later:
        return list(range(len(spans)))
    drain = min(later)
    gaps = [g for req in (itls or []) for g in (req or [])]
    tol = 2.0 * (_median(gaps) or 0.0)
    return [i for i, (_s, e) in enumerate(spans) if e <= drain + tol]


def _lag1(values):
    n = len(values)
    if n < 3:
        return 0.0
    m = sum(values) / n
    den = sum((v - m) ** 2 for v in values)
    if den <= 0:
        return 0.0
    return sum((values[i] - m) * (values[i + 1] - m) for i in range(n - 1)) / den


def _batches(items, count):
    """``items`` cut into ``count`` consecutive batches whose sizes differ by at most one."""
    n = len(items)
    out, at = [], 0
    for b in range(count):
        size = n // count + (1 if b < n % count else 0)
        out.append(items[at:at + size])
        at += size
    return [b for b in out if b]


def drift_se_rel(span_s, cv=DRIFT_CV, tau_s=DRIFT_TAU_S):
    """The relative standard error that the GPU's drift leaves in a rate averaged over ``span_s`` seconds: the
    standard deviation of the time average of a stationary exponentially correlated process (CV ``cv``,
    correlation time ``tau_s``), ``cv * sqrt(2 (u - 1 + e^-u) / u^2)`` with ``u = span_s / tau_s``; ``cv`` itself
    for a span much shorter than ``tau_s``, ``cv * sqrt(2 tau / span)`` for a much longer one."""
    if not cv or cv <= 0:
        return 0.0
    u = max(0.0, float(span_s)) / float(tau_s)
    if u < 1e-4:
        return float(cv)
    return float(cv) * math.sqrt(2.0 * (u - 1.0 + math.exp(-u)) / (u * u))


def batch_rates(requests, concurrency, max_batches=MAX_BATCHES):
    """The batch means of one round: ``requests`` = [(output tokens, duration s)] of its steady requests in start
    order. Batches halve in number (double in size) while the lag-1 autocorrelation of their means is significant.
    Returns (rates, lag-1 autocorrelation of the batches kept)."""
    c = max(1, int(concurrency))
    count = min(max_batches, len(requests))
    while True:
        batches = _batches(requests, count)
        rates = [c * sum(o for o, _d in b) / sum(d for _o, d in b) for b in batches if sum(d for _o, d in b) > 0]
        r1 = _lag1(rates)
        if count <= MIN_BATCHES or len(rates) < 3 or r1 <= 2.0 / math.sqrt(len(rates)):
            return rates, r1
        count = max(MIN_BATCHES, count // 2)


def round_requests(detail, concurrency):
    """One bench_serving result line (with ``--output-details``) -> its steady requests [(output tokens, duration)]
    in start order, and what was used: {requests, steady, drained}."""
    ttfts = detail.get("ttfts") or []
    itls = detail.get("itls") or []
    lens = detail.get("output_lens") or []
    errors = detail.get("errors") or [""] * len(ttfts)
    ok = [not (errors[i] if i < len(errors) else "") and i < len(lens) and (lens[i] or 0) > 0
          for i in range(len(ttfts))]
    spans = timeline(ttfts, itls, concurrency, ok)
    steady = [i for i in steady_requests(spans, itls) if ok[i]]
    steady.sort(key=lambda i: spans[i][0])
    used = [(int(lens[i]), spans[i][1] - spans[i][0]) for i in steady if spans[i][1] > spans[i][0]]
    return used, {"requests": len(ttfts), "steady": len(used), "drained": len(ttfts) - len(steady)}


def steady_throughput(rounds, concurrency, max_batches=MAX_BATCHES, drift_cv=DRIFT_CV, drift_tau_s=DRIFT_TAU_S):
    """The steady-state output throughput of a level over its rounds (bench_serving result lines with their
    detail): {value, low, high, half_width, half_width_rel, half_width_batches, drift, batches, lag1, requests,
    steady_requests, rounds, method}. ``half_width`` is the batch means' and the GPU drift's (``drift``: cv, tau_s,
    the steady span in seconds and the relative standard error it leaves) together, ``sqrt(hw_batches^2 + (z
    se_drift value)^2)``; None with fewer than ``MIN_BATCHES`` batch means (no interval claimed). ``drift_cv`` 0
    leaves the drift out."""
    c = max(1, int(concurrency))
    all_used, rates, lags, total = [], [], [], 0
    for detail in rounds:
        used, counts = round_requests(detail, c)
        total += counts["requests"]
        all_used.extend(used)
        if used:
            r, lag = batch_rates(used, c, max_batches)
            rates.extend(r)
            lags.append(lag)
    method = "batch means + GPU drift" if drift_cv else "batch means"
    out = {"value": None, "low": None, "high": None, "half_width": None, "half_width_rel": None,
           "half_width_batches": None, "drift": None,
           "batches": len(rates), "lag1": max(lags) if lags else None, "requests": total,
           "steady_requests": len(all_used), "rounds": len(rounds), "method": method, "confidence": CONFIDENCE}
    dur = sum(d for _o, d in all_used)
    if not all_used or dur <= 0:
        return out
    value = c * sum(o for o, _d in all_used) / dur
    out["value"] = value
    span = dur / c  # the slots' busy time: the level's steady wall time
    se_drift = drift_se_rel(span, drift_cv, drift_tau_s)
    out["drift"] = {"cv": drift_cv, "tau_s": drift_tau_s, "span_s": span, "se_rel": se_drift}
    b = len(rates)
    if b >= MIN_BATCHES:
        mean = sum(rates) / b
        sd = math.sqrt(sum((r - mean) ** 2 for r in rates) / (b - 1))
        hw_b = t95(b - 1) * sd / math.sqrt(b)
        hw = math.sqrt(hw_b * hw_b + (Z95 * se_drift * value) ** 2)
        out.update(half_width=hw, half_width_rel=hw / value if value else None, half_width_batches=hw_b,
                   low=value - hw, high=value + hw)
    return out


def percentile(sorted_values, p):
    """The ``p``-th percentile (0-100) by linear interpolation between order statistics, as numpy's default
    (bench_serving's ``np.percentile``)."""
    n = len(sorted_values)
    if not n:
        return None
    pos = (n - 1) * p / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def percentile_interval(values, p):
    """{value, low, high, n}: the ``p``-th percentile and its distribution-free 95 % interval from the order
    statistics at ranks ``n p -/+ z sqrt(n p (1 - p))``; a side the sample cannot bound is None."""
    s = sorted(float(v) for v in values)
    n = len(s)
    out = {"value": percentile(s, p), "low": None, "high": None, "n": n}
    if not n:
        return out
    q = p / 100.0
    spread = Z95 * math.sqrt(n * q * (1 - q))
    lo_rank = int(math.floor(n * q - spread))  # 1-based ranks
    hi_rank = int(math.ceil(n * q + spread)) + 1
    if lo_rank >= 1:
        out["low"] = s[lo_rank - 1]
    if hi_rank <= n:
        out["high"] = s[hi_rank - 1]
    return out


def latency_samples(rounds):
    """The samples (ms) of the level's successful requests over its rounds: {ttft, itl, tpot}; TPOT per request as
    bench_serving computes it, (latency - ttft) / (output tokens - 1), for requests of more than one token."""
    ttft, itl, tpot = [], [], []
    for detail in rounds:
        lens = detail.get("output_lens") or []
        errors = detail.get("errors") or []
        for i, first in enumerate(detail.get("ttfts") or []):
            if (i < len(errors) and errors[i]) or i >= len(lens) or not lens[i]:
                continue
            gaps = (detail.get("itls") or [[]] * (i + 1))[i] or []
            ttft.append(float(first) * 1000.0)
            itl.extend(float(g) * 1000.0 for g in gaps)
            if lens[i] > 1:
                tpot.append(sum(float(g) for g in gaps) * 1000.0 / (lens[i] - 1))
    return {"ttft": ttft, "itl": itl, "tpot": tpot}


def latency_figures(rounds, percentiles=PERCENTILES):
    """{ttft: {n, p50: {value, low, high}, ...}, itl: ..., tpot: ...} in ms."""
    out = {}
    for name, values in latency_samples(rounds).items():
        entry = {"n": len(values)}
        for p in percentiles:
            iv = percentile_interval(values, p)
            entry["p%d" % p] = {"value": iv["value"], "low": iv["low"], "high": iv["high"]}
        out[name] = entry
    return out


def level_stats(rounds, concurrency, precision=DEFAULT_PRECISION):
    """Everything a level's record carries about its precision."""
    thr = steady_throughput(rounds, concurrency)
    rel = thr["half_width_rel"]
    return {"steady_output_throughput": thr, "latency": latency_figures(rounds),
            "precision_target": precision,
            "precision_reached": rel,
            "precise": bool(precision) and rel is not None and rel <= precision}


def requests_needed(thr, concurrency, precision, pilot_requests):
    """How many more requests a level needs (one more round) for its throughput interval to reach ``precision``,
    from what its rounds so far gave (``thr``: ``steady_throughput``). The half-width shrinks as one over the
    square root of the steady requests; a round loses ``concurrency`` of its requests to its drain. With too few
    batch means for an interval, the next round doubles what ran."""
    c = max(1, int(concurrency))
    steady = thr.get("steady_requests") or 0
    rel = thr.get("half_width_rel")
    if rel is not None and rel <= precision:
        return 0
    if rel is None or steady <= 0:
        return whole_cohorts(max(int(pilot_requests), MIN_BATCHES), c)
    want = steady * (rel / float(precision)) ** 2
    return whole_cohorts(int(math.ceil(want - steady)) + c, c)


def whole_cohorts(requests, concurrency):
    """``requests`` rounded up to a multiple of ``concurrency``: a closed loop's last, partial cohort would run in
    the drain, where it counts for nothing."""
    c = max(1, int(concurrency))
    return max(c, int(math.ceil(requests / float(c))) * c)


def pilot_requests(concurrency, pilot_prompts):
    """A sized level's first round: at least ``pilot_prompts`` requests and one per slot, in whole cohorts."""
    return whole_cohorts(max(int(pilot_prompts), 1), concurrency)


def budget_requests(wanted, concurrency, seconds_per_request, budget_left_s):
    """``wanted`` cut to what the per-level time budget leaves: ``concurrency`` slots, each request
    ``seconds_per_request`` long, for ``budget_left_s`` seconds; 0 when not even one cohort fits."""
    if budget_left_s is None:
        return wanted
    if seconds_per_request is None or seconds_per_request <= 0:
        return wanted
    fits = int(max(0.0, budget_left_s) / seconds_per_request) * max(1, int(concurrency))
    return min(wanted, fits) if fits >= concurrency else 0


def compare(a, b, precision=DEFAULT_PRECISION):
    """'higher' (a beats b), 'lower' or 'tie'. ``a``, ``b``: {value, half_width}. They differ when the 95 % interval
    of their difference, ``sqrt(ha^2 + hb^2)`` (independent runs), excludes 0 and the difference is larger than
    ``precision`` of their mean; a missing half-width counts as the precision target itself."""
    va, vb = a.get("value"), b.get("value")
    if va is None or vb is None:
        return "tie" if va is None and vb is None else ("lower" if va is None else "higher")
    mean = (abs(va) + abs(vb)) / 2.0
    ha = a.get("half_width")
    hb = b.get("half_width")
    ha = precision * abs(va) if ha is None else ha
    hb = precision * abs(vb) if hb is None else hb
    diff = va - vb
    if abs(diff) <= math.sqrt(ha * ha + hb * hb) or abs(diff) <= precision * mean:
        return "tie"
    return "higher" if diff > 0 else "lower"
