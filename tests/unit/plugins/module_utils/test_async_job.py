"""Reading an Ansible async job: its results file as async_wrapper writes it, and a process's liveness."""

import json
import os

from ansible_collections.moesweep.sweep.plugins.module_utils import async_job


def test_a_job_is_running_until_its_file_holds_a_result_without_started():
    assert async_job.job_result(None) is None  # not written yet
    assert async_job.job_result("{\"star") is None  # written half
    assert async_job.job_result(json.dumps({"started": 1, "finished": 0, "ansible_job_id": "j1"})) is None
    assert async_job.job_result(json.dumps(["not", "a", "result"])) is None
    done = {"changed": True, "msg": "ok"}
    assert async_job.job_result(json.dumps(done)) == done


def test_read_text_is_none_for_a_file_that_is_not_there(tmp_path):
    assert async_job.read_text(str(tmp_path / "missing")) is None
    (tmp_path / "f").write_text("x")
    assert async_job.read_text(str(tmp_path / "f")) == "x"


def test_alive_is_true_for_this_process_and_false_for_nonsense():
    assert async_job.alive(os.getpid()) is True
    assert async_job.alive(None) is False and async_job.alive("x") is False


def test_a_finished_job_returns_its_result_and_its_results_file_is_removed(tmp_path):
    results = tmp_path / "j1"
    results.write_text("{}")
    out, failed = async_job.finished({"rc": 0, "invocation": {"module_args": {}}, "levels": [1]}, str(results),
                                     "benchmark", progress={"version": 3})
    assert not failed and out == {"rc": 0, "levels": [1], "finished": True, "progress": {"version": 3}}
    assert not results.exists()


def test_a_failed_job_names_itself_when_it_said_nothing_and_check_mode_keeps_the_file(tmp_path):
    results = tmp_path / "j1"
    results.write_text("{}")
    out, failed = async_job.finished({"failed": True, "rc": 1}, str(results), "staging", check_mode=True)
    assert failed and out == {"rc": 1, "finished": True, "msg": "the staging job failed"} and results.exists()
    out, failed = async_job.finished({"failed": True, "msg": "disk full"}, str(results), "staging")
    assert failed and out["msg"] == "disk full" and "failed" not in out and not results.exists()


def test_a_zombie_is_not_alive():
    import subprocess
    import time

    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    # exited but not reaped (no wait yet): signal 0 still reaches it, alive() says it runs nothing
    while time.monotonic() < deadline:
        with open(f"/proc/{child.pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.05)
    os.kill(child.pid, 0)
    assert async_job.alive(child.pid) is False
    child.wait()
