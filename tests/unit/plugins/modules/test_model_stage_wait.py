"""model_stage_wait follows an async model_stage job: at every call the download's bytes on the disk against the
job's plan, with the rate and time left; once the job finished, the job's own result (its failure a failure, with
its keys); never an earlier stage's plan; a job whose process is gone fails."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import stage_progress as sp
from ansible_collections.moesweep.sweep.plugins.modules import model_stage_wait

RUNNING = {"started": 1, "finished": 0, "ansible_job_id": "j9.1"}  # what async_wrapper writes first
FILES = [{"name": "config.json", "size": 100}, {"name": "model.safetensors", "size": 10000}]


@pytest.fixture
def job(tmp_path, run_module):
    results = tmp_path / "j9.1"
    model = tmp_path / "model"
    model.mkdir()
    results.write_text(json.dumps(RUNNING))
    started = results.stat().st_mtime

    def call(**args):
        return run_module(model_stage_wait, dict({"results_file": str(results), "local_dir": str(model),
                                                  "wait": 0.2}, **args))

    def plan(at=None, pid=None, present=0):
        sp.write_plan(str(model), sp.plan("org/m", "c" * 40, FILES, present, started + 0.5 if at is None else at,
                                          pid or os.getpid()))

    def finish(result):
        results.write_text(json.dumps(result))

    call.plan, call.finish, call.model, call.results, call.started = plan, finish, model, results, started
    return call


def test_a_running_download_reports_its_bytes_rate_and_time_left(job):
    kind, r = job()
    assert kind == "exit" and r["finished"] is False and r["changed"] is False
    assert r["progress"]["bytes_done"] is None and "asks the hub" in r["progress"]["msg"]  # not planned yet
    job.plan(at=job.started)  # it began when the job did
    (job.model / "config.json").write_bytes(b"x" * 100)
    dl = job.model.joinpath(*sp.DOWNLOAD_DIR)
    dl.mkdir(parents=True)
    (dl / "abc.etag.incomplete").write_bytes(b"x" * 2500)
    kind, r = job()
    p = r["progress"]
    assert kind == "exit" and r["finished"] is False
    assert p["bytes_done"] == 2600 and p["bytes_total"] == 10100
    assert p["rate_bytes_s"] > 0 and p["eta_s"] > 0  # since the plan's start: 2600 bytes moved
    assert p["msg"].startswith("org/m: 2.6 of 10.1 kB, ") and p["msg"].endswith(" left")


def test_an_earlier_stages_plan_is_not_reported(job):
    job.plan(at=job.started - 3600)
    kind, r = job()
    assert kind == "exit" and r["finished"] is False and r["progress"]["bytes_done"] is None


def test_a_finished_job_returns_its_result_and_cleans_up(job):
    job.finish({"changed": False, "repo_id": "org/m", "revision": "c" * 40, "local_path": str(job.model),
                "bytes": 10100, "files": 2, "downloaded": False, "invocation": {"module_args": {}}})
    t0 = time.monotonic()
    kind, r = job(wait=30)
    assert time.monotonic() - t0 < 5  # at the first look, not after its wait
    assert kind == "exit" and r["finished"] is True and r["changed"] is False and r["downloaded"] is False
    assert r["revision"] == "c" * 40 and "invocation" not in r
    assert not job.results.exists()  # as async_status mode=cleanup removes it


def test_a_job_that_finished_during_the_wait_is_returned_when_it_finishes(job):
    job.plan()
    proc = subprocess.Popen(["sh", "-c", "sleep 0.5; printf '%s' \"$0\" > \"$1\"",
                             json.dumps({"changed": True, "downloaded": True, "bytes": 10100}), str(job.results)])
    try:
        t0 = time.monotonic()
        kind, r = job(wait=20)
        assert kind == "exit" and r["finished"] is True and r["downloaded"] is True
        assert time.monotonic() - t0 < 10
    finally:
        proc.wait()


def test_a_failed_job_fails_with_its_message_and_keys(job):
    msg = "org/m (staging refused at cccccccccccc): 10.1 kB to download ... has 1.0 kB free"
    job.finish({"failed": True, "msg": msg, "repo_id": "org/m", "local_path": str(job.model), "downloaded": False})
    kind, r = job()
    assert kind == "fail" and r["msg"] == msg and r["finished"] is True
    assert r["local_path"] == str(job.model) and r["repo_id"] == "org/m"  # what the failed point's record keeps


def test_a_job_whose_process_is_gone_fails(job, monkeypatch):
    monkeypatch.setattr(model_stage_wait, "GONE_GRACE_S", 0.0)
    proc = subprocess.Popen(["true"])
    proc.wait()
    job.plan(pid=proc.pid)
    kind, r = job(wait=0.5)
    assert kind == "fail" and "is gone" in r["msg"] and r["finished"] is True


def test_check_mode_looks_once_and_removes_nothing(job):
    job.finish({"changed": True, "downloaded": True})
    t0 = time.monotonic()
    kind, r = job(wait=30, _ansible_check_mode=True)
    assert kind == "exit" and r["finished"] is True and job.results.exists()
    job.results.write_text(json.dumps(RUNNING))
    kind, r = job(wait=30, _ansible_check_mode=True)
    assert kind == "exit" and r["finished"] is False and time.monotonic() - t0 < 5


def test_bad_arguments(job, tmp_path):
    kind, r = job(wait=-1)
    assert kind == "fail" and "wait must be" in r["msg"]
    kind, r = job(results_file=str(tmp_path / "nope"))
    assert kind == "fail" and "no async job results file" in r["msg"]


def _staging_group():
    """A stand-in for an async staging job: a process in its own group with a child (the download), both
    ignoring nothing, like async_wrapper's job and the client it runs."""
    return subprocess.Popen(["sh", "-c", "sleep 300 & wait"], start_new_session=True)


def test_a_stop_ends_the_running_job_and_its_download_and_keeps_the_bytes(job):
    proc = _staging_group()
    try:
        job.plan(pid=proc.pid)
        dl = job.model.joinpath(*sp.DOWNLOAD_DIR)
        dl.mkdir(parents=True)
        (dl / "abc.etag.incomplete").write_bytes(b"x" * 2500)
        kind, r = job(stop=True, stop_grace=5)
        assert kind == "fail" and r["moesweep_stop"] is True and r["finished"] is True
        assert (r["repo_id"], r["revision"], r["downloaded"]) == ("org/m", "c" * 40, False)
        assert "asked to stop" in r["msg"] and "ended on SIGTERM" in r["msg"] and "kept" in r["msg"], r["msg"]
        assert proc.wait(timeout=5) is not None  # the job's group, its download with it, is gone
        # nothing of the group runs (the download, reparented, may stay a zombie until its new parent reaps it)
        time.sleep(0.2)
        left = subprocess.run(["ps", "-o", "pid=,stat=", "-g", str(proc.pid)], capture_output=True, text=True).stdout
        assert all(line.split()[1].startswith("Z") for line in left.splitlines()), left
        assert (dl / "abc.etag.incomplete").stat().st_size == 2500  # the bytes received stay for the next stage
        assert not job.results.exists()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)


def test_a_job_that_ignores_sigterm_is_killed_after_the_grace(job):
    proc = subprocess.Popen(["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"], start_new_session=True)
    try:
        time.sleep(0.3)  # the trap is set
        job.plan(pid=proc.pid)
        t0 = time.monotonic()
        kind, r = job(stop=True, stop_grace=1)
        assert kind == "fail" and r["moesweep_stop"] is True and "killed after 1 s" in r["msg"], r["msg"]
        assert time.monotonic() - t0 < 5
        assert proc.wait(timeout=5) == -9
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)


def test_a_stop_before_the_job_planned_waits_for_its_plan_and_a_finished_job_is_reported_as_finished(job):
    kind, r = job(stop=True)
    assert kind == "exit" and r["finished"] is False  # no pid to end yet: the next poll ends it
    job.finish({"changed": True, "repo_id": "org/m", "revision": "c" * 40, "local_path": str(job.model),
                "bytes": 10100, "files": 2, "downloaded": True})
    kind, r = job(stop=True)
    assert kind == "exit" and r["finished"] is True and "moesweep_stop" not in r  # the sweep's next step stops


def test_check_mode_never_ends_a_job(job):
    job.plan()  # this test process stands for the job
    kind, r = job(stop=True, _ansible_check_mode=True)
    assert kind == "exit" and r["finished"] is False


def test_never_its_own_process_group(monkeypatch):
    sent = []
    monkeypatch.setattr(model_stage_wait.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    how = model_stage_wait.end_job(os.getpid(), 0, kill=lambda *a: pytest.fail("killpg of its own group"),
                                   getpgid=lambda pid: os.getpgrp())
    assert sent and sent[0] == (os.getpid(), model_stage_wait.signal.SIGTERM), (sent, how)
