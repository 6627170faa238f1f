"""sglang_bench_wait follows an async sglang_bench job: it returns at each new progress version, never twice for
one version, never for a document an earlier run left, and once the job finished with the job's own result."""

from __future__ import annotations

import json
import os
import time

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import bench_progress as bp
from ansible_collections.moesweep.sweep.plugins.modules import sglang_bench_wait

RUNNING = {"started": True, "finished": False, "ansible_job_id": "j1.2"}  # what async_wrapper writes first


@pytest.fixture
def job(tmp_path, run_module):
    results = tmp_path / "j1.2"
    out = tmp_path / "out"
    out.mkdir()
    results.write_text(json.dumps(RUNNING))
    job_started = results.stat().st_mtime

    def call(**args):
        return run_module(sglang_bench_wait, dict({"results_file": str(results), "output_dir": str(out),
                                                   "wait": 0.3}, **args))

    def progress(doc):
        bp.BenchDir(str(out)).write_progress(doc)

    def finish(result):
        results.write_text(json.dumps(result))

    call.progress, call.finish, call.started, call.out, call.results = progress, finish, job_started, out, results
    return call


def test_each_version_is_returned_once_then_the_call_waits(job):
    doc = bp.new([(1, 4), (4, 8)], {}, pid=os.getpid(), started=job.started + 0.5)
    job.progress(bp.update(doc, 1, "running", t_start=1.0))
    kind, r = job()
    assert kind == "exit" and r["finished"] is False
    assert [lv["state"] for lv in r["progress"]["levels"]] == ["running", "pending"]
    t0 = time.monotonic()
    kind, r = job()  # nothing new: it waits its 0.3 s and returns the same
    assert kind == "exit" and not r["finished"] and time.monotonic() - t0 >= 0.3
    assert r["progress"]["version"] == 2
    job.progress(bp.update(bp.update(doc, 1, "done", ok=True, figures={"output_throughput": 40.0}), 4, "running"))
    kind, r = job()
    assert [lv["state"] for lv in r["progress"]["levels"]] == ["done", "running"]


def test_progress_an_earlier_run_left_is_not_reported(job):
    job.progress(bp.new([(1, 4)], {}, pid=os.getpid(), started=job.started - 3600))
    kind, r = job()
    assert kind == "exit" and r["progress"] is None and r["finished"] is False


def test_a_later_jobs_progress_is_neither_reported_nor_its_gate_opened(job):
    """A wait whose controller was killed keeps polling on the host for its last seconds; the next run's job in the
    same directory (another key) is not its job: its progress is not reported and its gate is not opened."""
    job.progress(bp.new([(1, 4)], {}, pid=os.getpid(), started=job.started + 30, key="next-run"))
    kind, r = job(job_key="killed-run", go=True)
    assert kind == "exit" and r["progress"] is None and r["finished"] is False
    assert not (job.out / bp.GO_FILE).exists()
    kind, r = job(job_key="next-run", go=True)  # the job's own wait
    assert kind == "exit" and r["progress"]["job_key"] == "next-run" and (job.out / bp.GO_FILE).exists()


def test_a_finished_job_returns_its_result(job):
    job.progress(bp.update(bp.new([(1, 4)], {}, pid=os.getpid(), started=job.started + 1), 1, "done", ok=True))
    job.finish({"changed": True, "state": "ok", "levels": [{"concurrency": 1, "ok": True}], "msg": "ok: c1",
                "invocation": {"module_args": {}}})
    kind, r = job(wait=30)
    assert kind == "exit" and r["finished"] is True and r["state"] == "ok" and r["levels"][0]["ok"]
    assert "invocation" not in r and r["progress"]["levels"][0]["state"] == "done"
    assert not os.path.exists(job.results)  # cleaned up, as async_status mode=cleanup does


def test_a_failed_job_fails_the_task_with_its_message(job):
    job.finish({"failed": True, "state": "error", "levels": [], "msg": "sglang_bench: nothing listens on :1"})
    kind, r = job()
    assert kind == "fail" and r["msg"] == "sglang_bench: nothing listens on :1" and r["finished"] is True
    assert r["state"] == "error"
    job.finish({"failed": True, "msg": "Timeout exceeded", "child_pid": 7})  # async_wrapper's own timeout
    kind, r = job()
    assert kind == "fail" and r["msg"] == "Timeout exceeded"


def test_a_benchmark_gone_without_a_result_fails(job, monkeypatch):
    monkeypatch.setattr(sglang_bench_wait, "GONE_GRACE_S", 0.0)
    doc = bp.new([(1, 4)], {}, pid=2 ** 22 + 12345, started=job.started + 1)  # above pid_max: no such process
    job.progress(doc)
    kind, r = job()  # the first call returns the new version
    assert kind == "exit"
    kind, r = job()
    assert kind == "fail" and "is gone and its job wrote no result" in r["msg"]


def test_no_results_file_names_what_to_pass(run_module, tmp_path):
    kind, r = run_module(sglang_bench_wait, {"results_file": str(tmp_path / "nope"), "output_dir": str(tmp_path)})
    assert kind == "fail" and "pass the results_file the async sglang_bench task registered" in r["msg"]


def test_asked_to_stop_it_tells_the_running_benchmark(job):
    job.progress(bp.update(bp.new([(1, 4), (4, 8)], {}, pid=os.getpid(), started=job.started + 1), 1, "running"))
    kind, r = job(stop=True)
    assert kind == "exit" and r["stop_requested"] is True
    assert (job.out / bp.STOP_FILE).read_text().startswith("asked at ")


def test_a_stop_for_a_finished_job_asks_nothing(job):
    job.finish({"changed": True, "state": "ok", "levels": [], "msg": "ok"})
    kind, r = job(stop=True)
    assert kind == "exit" and r["finished"] and not (job.out / bp.STOP_FILE).exists()


def test_go_opens_a_gated_jobs_gate_only_once_its_own_progress_is_there(job):
    job(go=True)  # no progress yet: the job may still be clearing an earlier run's files
    assert not (job.out / bp.GO_FILE).exists()
    job.progress(bp.new([(1, 4)], {}, pid=os.getpid(), started=job.started - 3600))  # an earlier run's
    job(go=True)
    assert not (job.out / bp.GO_FILE).exists()
    job.progress(bp.new([(1, 4)], {}, pid=os.getpid(), started=job.started + 1))
    kind, r = job(go=True)
    assert kind == "exit" and (job.out / bp.GO_FILE).read_text().startswith("gate opened at ")


def test_a_stop_wins_over_go(job):
    job.progress(bp.new([(1, 4)], {}, pid=os.getpid(), started=job.started + 1))
    kind, r = job(go=True, stop=True)
    assert r["stop_requested"] and (job.out / bp.STOP_FILE).exists() and not (job.out / bp.GO_FILE).exists()
