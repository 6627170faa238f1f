"""Sweep settings for the simulated hosts on a small machine (2 cores): what the integration tests and the bench
scripts (``bench/sweep_wall.py``) pass to a sweep so a point takes seconds and its figures are not the machine's
CPU limit. They are extra variables and simulator overrides, never defaults: a real host gets none of them.

* ``SIM_FAST``: the simulator's startup in seconds instead of tens of seconds (its phases x 0.1); phases and log
  lines are unchanged.
* ``SMALL_BENCH``: benchmark settings small enough for a 2-core machine: two levels, short requests, four prompts
  one after the other at c1 and two waves at c4, and a few GSM8K questions in the accuracy stage.
  ``SMALL_BENCH_PROMPTS``: each level's prompt count (concurrency -> num_prompts), what a level must complete.
* ``SIM_RATES``: the token model's rates (``MOESWEEP_SIM_DECODE_RATE``: tok/s per request at batch 1,
  ``_DECODE_ALPHA``, ``_PREFILL_RATE``: tok/s), the same for every backend: the decode rate stays low so the
  simulator and the client are far from CPU bound, and no backend wins a sweep but by noise.
"""

from __future__ import annotations

SIM_FAST = {"MOESWEEP_SIM_TIME_SCALE": "0.1"}

SMALL_BENCH = {"sglang_bench_input_len": 32, "sglang_bench_output_len": 48, "sglang_bench_concurrency": [1, 4],
               "sglang_bench_num_prompts": [4, 8], "sglang_bench_telemetry_interval_ms": 250,
               # the accuracy stage before the benchmark: a few GSM8K questions, answered from the shipped data
               "sglang_bench_accuracy_questions": 8}
SMALL_BENCH_PROMPTS = dict(zip(SMALL_BENCH["sglang_bench_concurrency"], SMALL_BENCH["sglang_bench_num_prompts"],
                               strict=True))

SIM_RATES = {"MOESWEEP_SIM_DECODE_RATE": "40", "MOESWEEP_SIM_DECODE_ALPHA": "0.05", "MOESWEEP_SIM_PREFILL_RATE": "5000"}
