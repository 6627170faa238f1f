"""A backend comparison the user can trust, end to end: the sglang_bench module (real sglang 0.5.9 bench_serving, a
level sized to the default precision) against simulated servers whose true throughputs differ by 1 % and by 10 %,
then the sweep's records, ranking and restore choice (plugin_utils records, restore, summary).

* 1 % apart: a tie at the default precision (+-2 %), and the restore states the rule that broke it;
* 10 % apart: ordered, and the restore takes the faster;
* every level's record carries its interval and sample counts, and its steady-state figure is within 2 % of the
  token model's ground truth.

The simulator's rates are simulation parameters (tokenmodel), not claims about hardware.
"""

from __future__ import annotations

import concurrent.futures
import time

import pytest
from ansible_collections.moesweep.sweep.plugins.plugin_utils import records, restore, summary

from moesweep.sim import local_server

pytestmark = [pytest.mark.slow, pytest.mark.alone]

BASE = (30.0, 0.05, 5000.0)  # decode tok/s per request at batch 1, alpha, prefill tok/s
INPUT_LEN, OUTPUT_LEN, LEVEL = 32, 64, 4


@pytest.fixture(scope="module")
def client_python():
    try:
        return local_server.bench_client_python()
    except local_server.VenvError as exc:
        pytest.skip(f"cannot build the bench client venv: {exc}")


@pytest.fixture(scope="module")
def runs(client_python, tmp_path_factory):
    """{name: (record, the token model's throughput)} for the base backend and two faster ones."""
    out = {}
    for name, factor in (("base", 1.0), ("one_pct", 1.01), ("ten_pct", 1.10)):
        work = tmp_path_factory.mktemp(name)
        rates = (BASE[0] * factor, BASE[1], BASE[2] * factor)  # every rate scaled: the throughput scales exactly
        with local_server.SimServer(work / "srv", rates=rates) as srv:
            args = local_server.module_args(srv, client_python, work / "out", input_len=INPUT_LEN,
                                            output_len=OUTPUT_LEN, concurrency=[LEVEL], telemetry=False)
            rc, res, _wall = local_server.run_module(args, work, env=srv.smi_env)
            assert rc == 0 and res["state"] == "ok", res.get("msg")
            truth = srv.expected(LEVEL, INPUT_LEN, OUTPUT_LEN)
        record = records.build_point_record({"sweep_id": "s", "host": "h", "point": name, "simulated": True,
                                             "benchmark": res, "launch": {"backend": name},
                                             "readiness": {"state": "ready"}})
        assert record["status"] == "passed"
        out[name] = (record, truth)
    return out


def test_records_carry_intervals_and_counts_near_the_ground_truth(runs):
    for name, (record, truth) in runs.items():
        (level,) = record["benchmark"]["levels"]
        stats = level["stats"]
        thr = stats["steady_output_throughput"]
        assert stats["sized"] and stats["precise"] and stats["ended_by"] == "precision", (name, stats)
        assert thr["half_width_rel"] <= 0.02 and thr["batches"] >= 5 and thr["steady_requests"] <= thr["requests"]
        assert level["num_prompts"] == thr["requests"] == sum(r["num_prompts"] for r in level["rounds"])
        assert abs(thr["value"] / truth - 1) < 0.02, (name, thr["value"], truth)
        assert stats["latency"]["ttft"]["n"] == thr["requests"]
        assert stats["latency"]["itl"]["n"] == thr["requests"] * (OUTPUT_LEN - 1)


def test_one_percent_apart_is_a_tie(runs):
    base, one = runs["base"][0], runs["one_pct"][0]
    best, tied = summary.ranking([base, one], LEVEL)
    assert {best["point"]} | {r["point"] for r in tied} == {"base", "one_pct"}
    choice = restore.choose_restore([base, one], "h", "best", LEVEL, {}, ["base", "one_pct"])
    assert len(choice["ties"]) == 1 and summary.TIE_RULE in choice["reason"]
    rows = summary.summary_rows([base, one], LEVEL)
    assert sorted((r["best"], r["tie"]) for r in rows) == [(False, True), (True, False)]


def test_ten_percent_apart_is_ordered_and_the_restore_takes_the_faster(runs):
    base, ten = runs["base"][0], runs["ten_pct"][0]
    best, tied = summary.ranking([base, ten], LEVEL)
    assert best["point"] == "ten_pct" and tied == []
    choice = restore.choose_restore([base, ten], "h", "best", LEVEL, {}, ["base", "ten_pct"])
    assert choice["point"] == "ten_pct" and choice["ties"] == []


def test_a_gated_sized_job_runs_its_rounds_once_released(client_python, tmp_path):
    """A sweep's job is started gated: the go line and each round's question share the driver's stdin."""
    server = local_server.SimServer(tmp_path / "srv", rates=BASE)
    out = tmp_path / "out"
    args = local_server.module_args(server, client_python, out, input_len=INPUT_LEN, output_len=OUTPUT_LEN,
                                    concurrency=[LEVEL], repetitions=2, gated=True, gate_timeout=300, telemetry=False)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        job = pool.submit(local_server.run_module, args, tmp_path / "job", server.smi_env)
        time.sleep(2)
        with server:
            (out / "go").write_text("")
            rc, res, _wall = job.result(timeout=300)
    assert rc == 0 and res["state"] == "ok", res.get("msg")
    (level,) = res["levels"]
    assert len(level["rounds"]) == 2 and level["num_prompts"] == 2 * LEVEL * 2  # two pilots of two cohorts
    assert level["stats"]["steady_output_throughput"]["rounds"] == 2 and level["stats"]["precise"]
