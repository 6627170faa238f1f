"""plugin_utils.summary: reading points.jsonl, the comparison rows, the best point and the renderings, on the
recorded sweeps of tests/fixtures/results/ (a SIMULATED sweep run through the real modules, and a measured one
whose figures come from a public report; see SOURCES.md there)."""

from __future__ import annotations

import copy
import csv
import io
import json

import pytest
from ansible_collections.moesweep.sweep.plugins.plugin_utils import summary
from helpers.paths import FIXTURES

SIM = FIXTURES / "results" / "sim-rtx6000-0.5.9"
MEASURED = FIXTURES / "results" / "gb200-minimax-m2.7"


@pytest.fixture(scope="module")
def sim():
    return summary.load_points(SIM)


@pytest.fixture(scope="module")
def measured():
    return summary.load_points(MEASURED / "points.jsonl")


def _row(rows, point):
    return next(r for r in rows if r["point"] == point)


# ---- reading -------------------------------------------------------------------------------------


def test_load_points_reads_every_record_of_the_sweep(sim):
    assert [(r["kind"], r["point"]) for r in sim] == [
        ("point", "flashinfer_cutlass"), ("point", "cutlass"), ("point", "flashinfer_trtllm"), ("point", "triton"),
        ("point", "auto"), ("point", "deep_gemm"), ("point", "flashinfer_cutedsl"), ("restore", "flashinfer_cutlass")]
    assert all(r["schema"] == summary.SCHEMA and r["simulated"] is True for r in sim)


def test_a_torn_last_line_and_blank_lines_are_skipped(tmp_path):
    text = (SIM / "points.jsonl").read_text()
    lines = text.splitlines(keepends=True)
    torn = lines[1][: len(lines[1]) // 2]  # a crash mid-append: no newline
    (tmp_path / "points.jsonl").write_text(lines[0] + "\n  \n" + torn)
    got = summary.load_points(tmp_path)
    assert [r["point"] for r in got] == ["flashinfer_cutlass"]


def test_a_complete_last_line_without_its_newline_is_read(tmp_path):
    """#37 item 6: a whole last record without its newline is a record (`moesweep report` said "no point record
    yet" for a file of one such line); only a torn one is skipped."""
    lines = (SIM / "points.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "points.jsonl").write_text(lines[0] + lines[1].rstrip("\n"))
    second = json.loads(lines[1])["point"]
    assert [r["point"] for r in summary.load_points(tmp_path)] == ["flashinfer_cutlass", second]
    (tmp_path / "points.jsonl").write_text(lines[0].rstrip("\n"))
    assert [r["point"] for r in summary.load_points(tmp_path)] == ["flashinfer_cutlass"]


def test_a_missing_file_and_a_directory_without_points_are_clear_errors(tmp_path):
    with pytest.raises(summary.ResultsError, match=r"does not exist: give a sweep's results directory"):
        summary.load_points(tmp_path / "nope")
    with pytest.raises(summary.ResultsError, match=r"holds no points.jsonl: it is not a sweep's results directory"):
        summary.load_points(tmp_path)


def test_a_damaged_line_names_file_and_line(tmp_path):
    lines = (SIM / "points.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "points.jsonl").write_text(lines[0] + "{not json\n" + lines[1])
    with pytest.raises(summary.ResultsError, match=r"points.jsonl line 2 is not JSON"):
        summary.load_points(tmp_path)


def test_binary_non_utf8_wrong_schema_and_non_objects_are_refused(tmp_path):
    path = tmp_path / "points.jsonl"
    path.write_bytes(b"\x1f\x8b\x08\x00\x00\x00binary\x00\n")
    with pytest.raises(summary.ResultsError, match="not a text file"):
        summary.load_points(path)
    path.write_bytes(b'{"schema": "moesweep.point/2", "x": "\xff\xfe"}\n')
    with pytest.raises(summary.ResultsError, match="not UTF-8 text"):
        summary.load_points(path)
    path.write_text(json.dumps({"schema": "moesweep.point/1", "kind": "point"}) + "\n")
    with pytest.raises(summary.ResultsError, match=r"schema 'moesweep.point/1'; this moesweep reads moesweep.point/2"):
        summary.load_points(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(summary.ResultsError, match="is a JSON list, not a point record"):
        summary.load_points(path)


def test_latest_keeps_the_last_record_of_each_host_point_and_kind(sim):
    rerun = copy.deepcopy(sim[3])  # triton, recorded again by a resumed run
    rerun["status"], rerun["cause"] = "passed", None
    got = summary.latest(sim + [rerun])
    assert len(got) == len(sim)
    assert [r["point"] for r in got] == [r["point"] for r in sim]  # first-seen order
    assert got[3] is rerun
    # the restore record of flashinfer_cutlass is another kind: kept beside the point
    assert [r["kind"] for r in got if r["point"] == "flashinfer_cutlass"] == ["point", "restore"]


# ---- rows ----------------------------------------------------------------------------------------


def test_the_reference_concurrency_is_the_one_the_sweep_ran_with(sim, measured):
    assert summary.default_reference_concurrency(sim) == 16
    assert summary.default_reference_concurrency(measured) == 128
    # two sweeps naming different levels: the highest level every benchmarked point ran
    assert summary.default_reference_concurrency(sim + measured) == 16


def test_one_row_per_point_with_status_and_decisive_reason(sim):
    rows = summary.summary_rows(sim)
    assert [(r["point"], r["status"]) for r in rows] == [
        ("flashinfer_cutlass", "passed"), ("cutlass", "passed"), ("flashinfer_trtllm", "refused"),
        ("triton", "crashed"), ("auto", "bad_output"), ("deep_gemm", "bench_failed"),
        ("flashinfer_cutedsl", "invalid_gpu_state")]
    reasons = {r["point"]: r["reason"] for r in rows}
    assert reasons["flashinfer_cutlass"] == ""
    assert reasons["flashinfer_trtllm"].startswith("s9-trtllm-sm10x-only: trtllm-gen fused MoE kernels exist for "
                                                   "SM100/SM103 only")
    assert reasons["triton"] == ("in kv_cache: RuntimeError: Not enough memory. Please try to increase "
                                 "--mem-fraction-static. Current value: self.server_args.mem_fraction_static=0.92")
    assert reasons["auto"] == "generate 'The capital of France is': one token repeated: id 1066 is 32 of 32 tokens"
    assert reasons["deep_gemm"] == "c4: 12 requests failed: level timed out after 20 s (level_timeout)"
    assert reasons["flashinfer_cutedsl"].startswith("c4: GPU 0: HW slowdown active in ")
    assert _row(rows, "triton")["cause"] == "oom"
    assert all(r["simulated"] is True and r["data"] == "SIMULATED" for r in rows)


def test_figures_only_for_ok_levels_never_for_failed_or_invalid_ones(sim):
    rows = summary.summary_rows(sim)
    record = next(r for r in sim if r["point"] == "flashinfer_cutlass")
    fig = {lv["concurrency"]: lv["figures"] for lv in record["benchmark"]["levels"]}
    cutlass = _row(rows, "flashinfer_cutlass")
    assert [(c["concurrency"], c["state"]) for c in cutlass["levels"]] == [(1, "ok"), (4, "ok"), (16, "ok")]
    assert cutlass["levels"][2]["output_tok_s"] == fig[16]["output_throughput"]
    assert cutlass["levels"][2]["total_tok_s"] == fig[16]["total_throughput"]
    stalled = _row(rows, "deep_gemm")["levels"]
    assert [c["state"] for c in stalled] == ["ok", "failed", "failed"]
    assert stalled[1]["output_tok_s"] is None and stalled[1]["total_tok_s"] is None
    # the slowed-down GPUs' levels completed every request, yet their figures are not results
    hot = _row(rows, "flashinfer_cutedsl")["levels"]
    raw = next(r for r in sim if r["point"] == "flashinfer_cutedsl")["benchmark"]["levels"]
    assert raw[1]["ok"] is True and raw[1]["figures"]["output_throughput"] > 0
    assert [c["state"] for c in hot] == ["ok", "invalid", "invalid"]
    assert hot[1]["output_tok_s"] is None
    assert [c["state"] for c in _row(rows, "triton")["levels"]] == ["not_run"] * 3


def test_reference_level_latency_gpu_figures_and_diagnosis(sim):
    row = _row(summary.summary_rows(sim), "flashinfer_cutlass")
    record = next(r for r in sim if r["point"] == "flashinfer_cutlass")
    level = next(lv for lv in record["benchmark"]["levels"] if lv["concurrency"] == 16)
    assert row["reference_concurrency"] == 16
    assert row["ttft_p50_ms"] == level["figures"]["median_ttft_ms"]
    assert row["ttft_p99_ms"] == level["figures"]["p99_ttft_ms"]
    assert row["gpu_util_pct"] == level["diagnosis"]["figures"]["util_pct"]
    assert row["gpu_power_pct"] == pytest.approx(100 * level["diagnosis"]["figures"]["power_frac"])
    assert row["diagnosis"] == "launch_bound"
    assert row["startup_s"] == record["readiness"]["elapsed"]
    assert row["gpus"] == 8  # --tp-size 8
    assert row["tok_s_per_user"] == pytest.approx(level["figures"]["output_throughput"] / 16)
    assert row["tok_s_per_gpu"] == pytest.approx(level["figures"]["output_throughput"] / 8)
    # a level that failed has no latency, no GPU figure; an invalid one says so in the diagnosis
    stalled = _row(summary.summary_rows(sim), "deep_gemm")
    assert stalled["ttft_p50_ms"] is None and stalled["gpu_util_pct"] is None
    assert _row(summary.summary_rows(sim), "flashinfer_cutedsl")["diagnosis"] == "invalid_gpu_state"


def test_another_reference_concurrency(sim):
    row = _row(summary.summary_rows(sim, 4), "cutlass")
    level = next(lv for lv in next(r for r in sim if r["point"] == "cutlass")["benchmark"]["levels"]
                 if lv["concurrency"] == 4)
    assert row["reference_concurrency"] == 4 and row["ttft_p99_ms"] == level["figures"]["p99_ttft_ms"]
    assert summary.summary_rows(sim, "4") == summary.summary_rows(sim, 4)  # -e values arrive as strings
    for bad in (0, -4, "x", True, 4.0):
        with pytest.raises(ValueError, match="positive integer"):
            summary.summary_rows(sim, bad)


def test_gpu_count_follows_sglang_data_parallel_controller():
    def rec(flags):
        return {"launch": {"flags": flags}}

    assert summary.gpu_count(rec({"tp-size": 4})) == 4
    assert summary.gpu_count(rec({"tensor-parallel-size": 2, "pp-size": 2})) == 4
    assert summary.gpu_count(rec({"tp-size": 2, "dp-size": 4})) == 8  # one TP group per DP replica
    assert summary.gpu_count(rec({"tp-size": 8, "dp-size": 8, "enable-dp-attention": True})) == 8
    assert summary.gpu_count(rec({"model-path": "x"})) == 1
    assert summary.gpu_count({"facts": {"gpu_count": 4}}) == 4
    assert summary.gpu_count({}) is None


def test_startup_phases_come_from_the_readiness_timeline(sim):
    phases = dict(summary.startup_phases(sim[0]))
    timeline = sim[0]["readiness"]["timeline"]
    assert phases["load weights"] == timeline["load_weights"]["duration"]
    assert phases["CUDA graph capture"] == timeline["cuda_graph"]["duration"]
    assert phases["KV cache"] == timeline["kv_cache"]["duration"] and phases["warmup"] == timeline["warmup"]["duration"]
    assert sum(phases.values()) == pytest.approx(sim[0]["readiness"]["elapsed"])
    assert summary.startup_phases(sim[2]) == []  # refused: never started


# ---- best point ----------------------------------------------------------------------------------


def test_best_point_is_the_fastest_passed_point_at_the_reference(sim, measured):
    assert summary.best_point(sim, 16)["point"] == "flashinfer_cutlass"
    assert summary.best_point(measured, 128)["point"] == "flashinfer_trtllm_routed"
    assert summary.best_point(measured, 1)["point"] == "flashinfer_cutedsl"  # 201.5 > 198.7 at c1
    assert summary.best_point(sim, 16, host="elsewhere") is None
    # a failed or invalid point is never best, however fast its ok levels were
    only_failures = [r for r in sim if r["status"] != "passed"]
    assert summary.best_point(only_failures, 1) is None


def test_best_point_ties_go_to_the_lower_p99_ttft(sim):
    a = copy.deepcopy(sim[0])
    b = copy.deepcopy(sim[0])
    b["point"] = b["backend"] = "twin"
    for rec, p99 in ((a, 500.0), (b, 400.0)):
        for lv in rec["benchmark"]["levels"]:
            lv["figures"]["output_throughput"] = 300.0
            lv["figures"]["p99_ttft_ms"] = p99
    assert summary.best_point([a, b], 16)["point"] == "twin"
    assert summary.best_point([b, a], 16)["point"] == "twin"


def test_best_is_marked_once_per_kind(sim, measured):
    rows = summary.summary_rows(sim + measured)
    assert [(r["data"], r["point"]) for r in rows if r["best"]] == [
        ("SIMULATED", "flashinfer_cutlass"), ("measured", "flashinfer_trtllm_routed")]


# ---- failures and caveats ------------------------------------------------------------------------


def test_failure_details_quote_the_decisive_lines_and_citations(sim):
    refused = summary.failure_details(sim[2])
    assert refused["status"] == "refused"
    assert any(line.startswith("the launch would fail with: RuntimeError: No supported CUDA architectures")
               for line in refused["lines"])
    assert "https://github.com/flashinfer-ai/flashinfer/blob/v0.6.3/flashinfer/jit/fused_moe.py#L215-L238" in \
        refused["citations"]
    assert len(refused["citations"]) == len(set(refused["citations"]))
    assert refused["alternatives"][:1] == ["auto (-> cutlass)"]
    crashed = summary.failure_details(sim[3])
    assert crashed["lines"] == [
        "readiness: crashed (oom) in phase kv_cache",
        "decisive line: RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current "
        "value: self.server_args.mem_fraction_static=0.92"]
    assert crashed["excerpt"].startswith("Scheduler hit an exception: Traceback (most recent call last):")
    garbage = summary.failure_details(sim[4])
    assert len(garbage["lines"]) == 5 and all(line.startswith("smoke: ") for line in garbage["lines"])
    first = garbage["excerpt"].splitlines()[0]
    assert first.startswith("generate 'The capital of France is' -> 'w066 w066 w066")
    assert first.endswith("(159 characters)")  # the garbage text is cut, its length said
    stalled = summary.failure_details(sim[5])
    assert stalled["lines"] == ["benchmark c4: 12 requests failed: level timed out after 20 s (level_timeout)",
                                "benchmark c16: 32 requests failed: level timed out after 20 s (level_timeout)"]
    hot = summary.failure_details(sim[6])
    gpu_lines = [line for line in hot["lines"] if line.startswith("GPU state c4:")]
    assert len(gpu_lines) == summary.MAX_REASONS_PER_LEVEL + 1 and gpu_lines[-1].endswith("more")


def test_caveats_from_the_preflight_carry_their_sources(sim):
    items = summary.caveats(sim[0])
    assert any(i.startswith("s9-flashinfer-cutlass-sm120-compute-120a: ") and "https://" in i for i in items)
    assert len(items) == len(set(items))


# ---- renderings ----------------------------------------------------------------------------------


def test_markdown_keeps_simulated_and_measured_apart_and_labelled(sim, measured):
    md = summary.render_markdown(summary.summary_rows(sim + measured), title="Sweep")
    assert md.index("## Measured on real GPU hosts") < md.index("## SIMULATED hosts")
    measured_part, sim_part = md.split("## SIMULATED hosts")
    table_rows = [line for line in md.splitlines() if line.startswith("| SIMULATED") or line.startswith("| measured")]
    assert len(table_rows) == 11
    assert "| SIMULATED" not in measured_part and "| measured" not in sim_part
    assert summary.SIMULATED_NOTE in md
    assert "| failed | failed |" in md and "| invalid | invalid |" in md


def test_markdown_of_a_simulated_sweep_says_so_in_its_title(sim):
    md = summary.render_markdown(summary.summary_rows(sim), title="Sweep sim-rtx6000-0.5.9")
    assert md.startswith("# Sweep sim-rtx6000-0.5.9 (SIMULATED)\n")
    assert all("SIMULATED" in line for line in md.splitlines() if line.startswith("| ") and "host" not in line)


def test_csv_has_every_level_and_a_data_column(sim, measured):
    rows = list(csv.DictReader(io.StringIO(summary.render_csv(summary.summary_rows(sim + measured)))))
    assert len(rows) == 11
    assert {r["data"] for r in rows} == {"SIMULATED", "measured"}
    assert all((r["data"] == "SIMULATED") == (r["simulated"] == "true") for r in rows)
    stalled = next(r for r in rows if r["point"] == "deep_gemm")
    assert stalled["c4_state"] == "failed" and stalled["c4_output_tok_s"] == ""
    assert float(stalled["c1_output_tok_s"]) > 0
    routed = next(r for r in rows if r["point"] == "flashinfer_trtllm_routed")
    assert routed["c128_output_tok_s"] == "9716.7" and routed["c128_total_tok_s"] == ""
    assert routed["c4_state"] == "not_run"


def test_text_table_is_fixed_width_and_labelled(sim, measured):
    text = summary.render_text(summary.summary_rows(sim + measured))
    assert "== Measured on real GPU hosts ==" in text and "== SIMULATED hosts" in text
    block = text.split("== SIMULATED hosts")[1].splitlines()[1:]
    header, rule, *body = block
    assert len(body) == 7 and all(line.startswith("SIMULATED ") for line in body)
    starts = [i for i, ch in enumerate(rule) if ch == "-" and (i == 0 or rule[i - 1] == " ")]
    for line in body:  # every cell starts under its header
        assert all(i == 0 or line[i - 2:i] == "  " for i in starts)
    assert summary.render_text([]) == "No point recorded.\n"


# ---- intervals and ties ---------------------------------------------------------------------------


def _with_interval(rec, value, half_width_rel, p99=None, requests=64):
    rec = copy.deepcopy(rec)
    for lv in rec["benchmark"]["levels"]:
        lv["stats"] = {"steady_output_throughput": {
            "value": value, "low": value * (1 - half_width_rel), "high": value * (1 + half_width_rel),
            "half_width": value * half_width_rel, "half_width_rel": half_width_rel, "requests": requests,
            "steady_requests": requests, "batches": 10, "rounds": 1, "method": "batch means"},
            "latency": {"ttft": {"n": requests, "p99": {"value": p99 or 100.0, "low": 90.0, "high": None}}},
            "precision_target": 0.02, "precision_reached": half_width_rel, "precise": half_width_rel <= 0.02}
        if p99 is not None:
            lv["figures"]["p99_ttft_ms"] = p99
    return rec


def _pair(sim, apart, hw=0.005):
    a = _with_interval(sim[0], 300.0, hw, p99=400.0)
    b = _with_interval(sim[0], 300.0 * (1 + apart), hw, p99=500.0)
    b["point"] = b["backend"] = "faster"
    return a, b


def test_one_percent_apart_is_a_tie_decided_by_the_lower_p99_ttft(sim):
    a, b = _pair(sim, 0.01)
    best, tied = summary.ranking([a, b], 16)
    assert best is a and tied == [b]  # b's 1 % more is not distinguishable; a has the lower p99 TTFT
    rows = summary.summary_rows([a, b], 16)
    assert [(r["point"], r["best"], r["tie"]) for r in rows] == [(a["point"], True, False), ("faster", False, True)]
    text = summary.render_markdown(rows)
    assert "*tie*" in text and "ties with faster" in text and summary.TIE_RULE in text


def test_ten_percent_apart_is_ordered(sim):
    a, b = _pair(sim, 0.10)
    best, tied = summary.ranking([a, b], 16)
    assert best is b and tied == []


def test_wide_intervals_tie_even_ten_percent_apart(sim):
    a, b = _pair(sim, 0.10, hw=0.08)
    assert summary.ranking([a, b], 16)[1] != []


def test_rows_csv_and_text_carry_intervals_and_sample_counts(sim):
    a, b = _pair(sim, 0.10)
    rows = summary.summary_rows([a, b], 16)
    row = _row(rows, "faster")
    assert row["ref_throughput"]["source"] == "steady state" and row["ref_throughput"]["requests"] == 64
    assert row["ttft_p99"]["n"] == 64
    cell = next(c for c in row["levels"] if c["concurrency"] == 16)
    assert cell["steady_low"] < cell["steady_tok_s"] < cell["steady_high"]
    parsed = list(csv.DictReader(io.StringIO(summary.render_csv(rows))))
    line = next(x for x in parsed if x["point"] == "faster")
    assert float(line["ref_tok_s_low"]) < float(line["ref_tok_s"]) < float(line["ref_tok_s_high"])
    assert line["ref_requests"] == "64" and line["ttft_n"] == "64" and line["c16_steady_tok_s"]
    assert "[" in summary.render_text(rows) and "req" in summary.render_text(rows)


def test_records_without_intervals_rank_as_before(sim):
    assert summary.throughput_at(sim[0], 16)["source"] == "whole run"
    assert summary.ranking(sim, 16)[1] == []


def _latency_levels(rec, by_c):
    rec = copy.deepcopy(rec)
    rec["benchmark"]["levels"] = [lv for lv in rec["benchmark"]["levels"] if lv["concurrency"] in by_c]
    for lv in rec["benchmark"]["levels"]:
        ttft, high = by_c[lv["concurrency"]]
        lv["ok"] = True
        lv["stats"] = {"latency": {"ttft": {"n": 40, "p99": {"value": ttft, "low": ttft * 0.9, "high": high}},
                                   "itl": {"n": 4000, "p99": {"value": 30.0, "low": 29.0, "high": 31.0}}}}
    return rec


def test_sla_search_takes_the_highest_level_meeting_the_slos(sim):
    levels_run = sorted(lv["concurrency"] for lv in sim[0]["benchmark"]["levels"])
    lo, mid, hi = levels_run[0], levels_run[1], levels_run[-1]
    rec = _latency_levels(sim[0], {lo: (100.0, 120.0), mid: (400.0, None), hi: (2000.0, 2500.0)})
    sla = summary.sla_concurrency(rec, ttft_p99_ms=500.0, itl_p99_ms=50.0)
    # mid meets the TTFT SLO by its p99, but 40 samples cannot bound its p99 from above: not confident
    assert (sla["concurrency"], sla["confident"]) == (mid, lo)
    assert [x["meets"] for x in sla["levels"]] == [True, True, False]
    assert summary.sla_concurrency(rec, ttft_p99_ms=50.0)["concurrency"] is None
    assert summary.sla_concurrency(rec, itl_p99_ms=20.0)["concurrency"] is None


def test_the_reason_of_a_crash_after_ready_is_never_the_ready_line():
    """#37: the readiness line of a server that crashed or stalled after ready is "The server is fired up and ready
    to roll!"; the reason column takes the judge of the run after the fact."""
    ready = {"state": "ready", "phase": "serving", "decisive_line": "The server is fired up and ready to roll!"}
    crashed = {"kind": "point", "status": "crashed", "readiness": ready, "smoke": {"state": "server_died", "crash": {
        "state": "crashed", "cause": "oom", "decisive_line": "torch.OutOfMemoryError: CUDA out of memory.",
        "unit_gone": True}}}
    assert summary.decisive(crashed) == "after ready: torch.OutOfMemoryError: CUDA out of memory."
    killed = {"kind": "point", "status": "crashed", "readiness": ready, "failed_msg": "the server stopped answering",
              "benchmark": {"state": "server_died", "crash": {"state": "crashed", "unit_gone": True}}}
    assert "fired up" not in summary.decisive(killed)
    stalled = {"kind": "point", "status": "hang", "readiness": ready,
               "smoke": {"state": "server_died", "crash": {"state": "ready", "unit_gone": False}}}
    assert "fired up" not in summary.decisive(stalled) and "stopped answering" in summary.decisive(stalled)


def _cell(point, axes, status, tok=None, line=None):
    rec = {"kind": "point", "host": "h", "point": point, "status": status, "axes": axes,
           "launch": {"command_line": "python -m sglang.launch_server --x " + point}}
    if tok is not None:
        rec["benchmark"] = {"levels": [{"concurrency": 64, "ok": True, "figures": {"output_throughput": tok}}]}
    if line:
        rec["readiness"] = {"state": "crashed", "decisive_line": line}
    return rec


def test_matrix_effects_per_axis_two_axis_table_failures_and_best_cell():
    from ansible_collections.moesweep.sweep.plugins.plugin_utils import summary as sm

    recs = [_cell("a.f", {"moe": "a", "attn": "f"}, "passed", 100.0),
            _cell("a.t", {"moe": "a", "attn": "t"}, "passed", 150.0),
            _cell("b.f", {"moe": "b", "attn": "f"}, "crashed", line="RuntimeError: no kernel for sm120"),
            _cell("b.t", {"moe": "b", "attn": "t"}, "refused"),
            {"kind": "point", "host": "h", "point": "plain", "status": "passed"}]
    fx = sm.matrix_effects(recs, 64)
    moe, attn = fx["axes"]
    assert moe["axis"] == "moe" and [v["best_tok_s"] for v in moe["values"]] == [150.0, None]
    assert moe["values"][1]["failures"]["crashed"][0]["line"].startswith("RuntimeError: no kernel")
    assert [v["best_tok_s"] for v in attn["values"]] == [100.0, 150.0]
    assert fx["table"]["cells"] == {"a": {"f": 100.0, "t": 150.0}, "b": {"f": None, "t": None}}
    assert fx["best"]["cell"] == "a.t" and fx["best"]["command_line"].endswith("a.t")
    text = sm.render_matrix_text(fx)
    assert "crashed in 1 cell(s): RuntimeError: no kernel" in text and "Best cell: a.t" in text
    assert "moe \\ attn" in text
    assert sm.matrix_effects(recs[-1:]) is None


def test_evidence_lines_give_each_hosts_warnings_and_the_best_points_all_reduce(sim):
    recs = copy.deepcopy(sim)
    checks = [{"name": "p2p", "verdict": "warn", "evidence": "nvidia-smi topo -p2p r: NS between 28 of 28 pairs",
               "fix": "keep NCCL_P2P_LEVEL / --disable-custom-all-reduce as the host allows"},
              {"name": "shm", "verdict": "ok", "evidence": "/dev/shm 64 GiB", "fix": ""},
              {"name": "disk", "verdict": "fail", "evidence": "10 GiB free", "fix": "a larger disk"}]
    for r in recs:
        r.setdefault("facts", {})["host_checks"] = checks
    best = summary.best_point(recs, 16)
    level = next(lv for lv in best["benchmark"]["levels"] if lv["concurrency"] == 16)
    level.setdefault("diagnosis", {})["interconnect"] = {
        "verdict": "interconnect_bound", "share": 0.34,
        "evidence": ["157 all-reduces x 96.0 us = 15.1 ms of a 44.1 ms decode step (34 %)"],
        "changes": ["P2P: 56 of 56 GPU pairs have no peer access", "custom all-reduce"]}
    lines = summary.evidence_lines(recs, 16)
    hosts = {r["host"] for r in summary.point_records(recs)}
    assert sorted(line for line in lines if "host checks:" in line) == sorted(
        f"{h} host checks: 1 ok, 1 warn, 1 fail (moesweep facts -i INVENTORY shows each)" for h in hosts)
    assert "  warn p2p: nvidia-smi topo -p2p r: NS between 28 of 28 pairs; fix: keep NCCL_P2P_LEVEL" in "\n".join(lines)
    assert "  fail disk: 10 GiB free; fix: a larger disk" in lines
    assert not any("shm" in line for line in lines)  # ok checks are counted, not listed
    assert f"{best['host']} / {best['point']} all-reduce at c16 (interconnect_bound): 157 all-reduces x 96.0 us" \
        in "\n".join(lines)
    assert lines[-1] == "  what would change it: P2P: 56 of 56 GPU pairs have no peer access"
    # nothing recorded, nothing said
    assert summary.evidence_lines(copy.deepcopy(sim), 16) == []


def test_a_figure_that_ended_wider_than_its_target_is_marked_imprecise(sim):
    wide = _with_interval(sim[0], 300.0, 0.05)  # its level spent its budget at +-5 % against a +-2 % target
    thr = summary.throughput_at(wide, 16)
    assert thr["precise"] is False
    assert summary.interval_text(thr).endswith(", imprecise (target +-2.0 %)")
    assert "imprecise" not in summary.interval_text(summary.throughput_at(_with_interval(sim[0], 300.0, 0.01), 16))
    assert "imprecise" not in summary.interval_text(summary.throughput_at(sim[0], 16))  # no target recorded
