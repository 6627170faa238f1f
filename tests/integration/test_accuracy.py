"""The accuracy stage end to end on the provisioned simulated SM120 host: sglang's real few-shot GSM8K evaluator
(the client venv's) against the simulated server, which answers the shipped questions from the same data. A sweep
where one backend answers wrongly (fault low_accuracy) records it bad_accuracy with its figures and wrong answers,
still benchmarks it, restores the healthy one although the faulty one is faster, and the report shows the accuracy
column and the accuracy-against-throughput plot; bad accuracy settings are refused before any point."""

from __future__ import annotations

import json

import pytest

from moesweep.sim.presets import SIM_FAST, SMALL_BENCH

pytestmark = pytest.mark.hosts

FAULTY, HEALTHY = "flashinfer_cutlass", "triton"  # flashinfer_cutlass is the simulator's fastest on SM120


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    results = tmp_path_factory.mktemp("accuracy-results")
    path = results / "settings.json"
    path.write_text(json.dumps({
        # one environment for every point: the fault names the backend it hits
        "sglang_server_extra_environment": dict(SIM_FAST, MOESWEEP_SIM_FAULT=f"low_accuracy:0.5@{FAULTY}"),
        "sglang_server_stall_timeout": 5, "sglang_server_ready_timeout": 120, "results_dir": str(results),
        **SMALL_BENCH, "sglang_bench_accuracy_questions": 20}))
    return path, results


def records(results, kind="point"):
    out = []
    for f in sorted(results.glob("*/points.jsonl"), key=lambda f: f.stat().st_mtime_ns):
        out += [r for r in map(json.loads, f.read_text().splitlines()) if r["kind"] == kind]
    return out


def test_a_backend_that_answers_wrongly_is_bad_accuracy_and_the_healthy_one_is_restored(bench_cluster, settings):
    path, results = settings
    proc = bench_cluster.playbook("sweep.yml", "-e", f"@{path}", "-e", f"backends=[{FAULTY},{HEALTHY}]", check=False)
    words = " ".join(proc.stdout.split())
    assert proc.returncode != 0 and "1 of 2 point(s) did not pass" in words, words[-4000:] + proc.stderr[-2000:]
    recs = {r["point"]: r for r in records(results)}
    bad, good = recs[FAULTY], recs[HEALTHY]
    assert good["status"] == "passed", (good["status"], good["failed_msg"], good["accuracy"])
    assert bad["status"] == "bad_accuracy", (bad["status"], bad["failed_msg"], bad["accuracy"])
    # the figures: the real evaluator's, on 20 questions, the GLM-5 family's published floor as the threshold
    acc = bad["accuracy"]
    assert acc["state"] == "bad_accuracy" and acc["num_questions"] == 20 and acc["accuracy"] < 0.8
    assert acc["correct"] == round(acc["accuracy"] * 20) and acc["threshold"] == 0.8
    assert "test_glm_5.py" in acc["settings"]["threshold_source"]
    assert "sglang.test.few_shot_gsm8k" in acc["command"] and "--num-questions 20" in acc["command"]
    example = acc["wrong_examples"][0]
    assert example["value"] != example["label"] and "####" in example["answer"]
    assert good["accuracy"]["accuracy"] == 1.0 and good["accuracy"]["state"] == "ok"
    # still benchmarked (the plot puts it on its throughput), and faster than the healthy one
    out = {p: r["benchmark"]["levels"][-1]["figures"]["output_throughput"] for p, r in recs.items()}
    assert all(lv["ok"] for lv in bad["benchmark"]["levels"]) and out[FAULTY] > out[HEALTHY], out
    # the host is left on the healthy point, not on the faster wrong one
    restore = records(results, "restore")[-1]
    assert restore["status"] == "passed" and restore["point"] == HEALTHY, restore
    assert "accuracy.json" in bad["artifacts"]

    from moesweep.report import build_report

    sweep_dir = results / bad["sweep_id"]
    report = build_report([sweep_dir], results / "report")
    md = (results / "report" / "report.md").read_text()
    assert "GSM8K accuracy" in md and f"{acc['accuracy']:.3f} ({acc['correct']}/20) < 0.80" in md, md[:3000]
    assert "1.000 (20/20)" in md and "bad_accuracy" in md
    assert any(str(name).endswith("accuracy.png") for name in report["plots"]), report["plots"]
    assert "expected" in md and "answered" in md  # the wrong answers, under Failures
    summary = (sweep_dir / "summary.md").read_text()
    assert "GSM8K accuracy" in summary and "DROP vs triton 1.000" in summary, summary


BAD = [
    (["-e", "sglang_bench_accuracy_questions=0"], "the subset must hold at least 1 question"),
    (["-e", "accuracy_reference=flashinfer_cutlas"], "accuracy reference backend 'flashinfer_cutlas' is not a point"),
    (["-e", "sglang_bench_accuracy_threshold=1.5"], "is outside 0..1"),
]


@pytest.mark.parametrize("args,needle", BAD, ids=["subset 0", "unknown reference", "threshold 1.5"])
def test_bad_accuracy_settings_are_refused_before_any_point(bench_cluster, settings, args, needle):
    path, _ = settings
    show = "systemctl show sglang.service -p MainPID,ExecStart"
    before = bench_cluster.sh(bench_cluster.names[0], show).stdout
    proc = bench_cluster.playbook("sweep.yml", "-e", f"@{path}", "-e", f"backends=[{HEALTHY}]", *args, check=False)
    words = " ".join(proc.stdout.split())
    assert proc.returncode != 0 and needle in words, words[-2000:]
    assert "sweep refused before any point ran" in words and "Start the point" not in proc.stdout
    assert bench_cluster.sh(bench_cluster.names[0], show).stdout == before
