"""The benchmark's progress document, and its output directory's files through BenchDir (module_utils
bench_progress): real files in tmp_path, a real second process for the lock."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import bench_progress as bp
from helpers.paths import FIXTURES, REPO


def test_a_new_document_marks_reused_levels_and_updates_one_level_at_a_time():
    doc = bp.new([(1, 16), (8, 40)], {1: {"ok": True, "figures": {"output_throughput": 40.1, "p99_itl_ms": 3}}},
                 pid=42, started=100.0)
    assert doc["version"] == 1 and doc["pid"] == 42
    assert doc["levels"][0] == {"concurrency": 1, "num_prompts": 16, "state": "reused", "ok": True,
                                "figures": {"output_throughput": 40.1}}
    assert [e["state"] for e in doc["levels"]] == ["reused", "pending"]
    running = bp.update(doc, 8, "running", t_start=101.0)
    assert running["version"] == 2 and running["levels"][1] == {"concurrency": 8, "num_prompts": 40,
                                                                "state": "running", "t_start": 101.0}
    assert doc["levels"][1]["state"] == "pending"  # the earlier version is left as it was
    done = bp.update(running, 8, "done", ok=True, figures=bp.brief({"output_throughput": 300.0, "errors": []}))
    assert done["levels"][1]["figures"] == {"output_throughput": 300.0} and done["levels"][1]["state"] == "done"
    with pytest.raises(ValueError):
        bp.update(done, 8, "finished")


def test_a_reader_sees_each_version_once_and_a_new_run_as_new():
    doc = bp.update(bp.new([(1, 16)], {}, pid=1, started=100.0), 1, "running")
    assert bp.newer(doc, None)
    token = bp.seen_token(doc)
    assert not bp.newer(doc, token)
    assert bp.newer(bp.update(doc, 1, "done"), token)
    # a later run of the same directory starts again at version 1: it is new all the same
    assert bp.newer(bp.new([(1, 16)], {}, pid=2, started=200.0), token)
    assert not bp.newer(None, token)


def test_progress_older_than_the_job_is_not_the_jobs():
    doc = bp.new([(1, 16)], {}, pid=1, started=100.0)
    assert bp.of_job(doc, 99.5) and bp.of_job(doc, 100.05)
    assert not bp.of_job(doc, 150.0)  # left by an earlier run in the same directory
    assert not bp.of_job({"levels": []}, 1.0) and not bp.of_job(None, 1.0)


def test_with_a_key_only_the_document_that_carries_it_is_the_jobs():
    mine = bp.new([(1, 16)], {}, pid=1, started=100.0, key="h-1")
    later = bp.new([(1, 16)], {}, pid=2, started=160.0, key="h-2")  # the next run's job, same directory
    assert mine["job_key"] == "h-1" and "job_key" not in bp.new([(1, 16)], {}, pid=1, started=100.0)
    assert bp.of_job(mine, 99.5, "h-1") and not bp.of_job(later, 99.5, "h-1")
    assert not bp.of_job(bp.new([(1, 16)], {}, pid=3, started=100.0), 99.5, "h-1")  # a job given no key
    # without its key a reader takes the later job's document for its own: what the key is for
    assert bp.of_job(later, 99.5)


def test_parse_takes_only_a_progress_document(tmp_path):
    path = tmp_path / bp.PROGRESS_FILE
    doc = bp.new([(4, 8)], {}, pid=3, started=1.0)
    bp.BenchDir(str(tmp_path)).write_progress(doc)
    assert bp.parse(path.read_text()) == doc
    assert [p.name for p in tmp_path.iterdir()] == [bp.PROGRESS_FILE]  # the temporary file was renamed
    assert bp.parse('{"levels": 3}') is None and bp.parse("{half") is None and bp.parse(None) is None


def test_the_parent_pid_is_read_after_the_last_parenthesis():
    # a real /proc/PID/stat whose command name holds ") " (tests/fixtures/proc/SOURCES.md)
    assert bp.stat_ppid((FIXTURES / "proc" / "stat-paren-comm.txt").read_text()) == 5477
    assert bp.stat_ppid("garbage") is None


def test_descendants_walks_the_whole_tree(tmp_path):
    for pid, ppid in ((10, 1), (11, 10), (12, 11), (13, 10), (20, 1)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (python3) S {ppid} {pid} 1 0 -1 4194304\n")
    (tmp_path / "self").mkdir()
    assert sorted(bp.descendants(10, proc_root=str(tmp_path))) == [11, 12, 13]
    assert bp.descendants(99, proc_root=str(tmp_path)) == []


def _fake_time():
    """A clock that only the sleep moves: a poll's timeout runs without waiting."""
    now = [0.0]

    def sleep(s):
        now[0] += s

    return (lambda: now[0]), sleep


def _own_job(tmp_path, d, started=200.0, key=None):
    """A gated job's async results file (first written at ``started``) and its own progress document in ``d``."""
    results = tmp_path / "own.results"
    results.write_text('{"started": 1}')
    os.utime(results, (started, started))
    d.write_progress(bp.new([(1, 4)], {}, pid=os.getpid(), started=started + 0.01, key=key))
    return str(results)


def _open(tmp_path, d, now):
    assert d.open_gate(_own_job(tmp_path, d), now) is True


def _holder(lock, pid_in_file=True):
    """Another process holding the benchmark lock (as a benchmark would), its pid written in it or not."""
    write = "fh.write('%d\\n' % os.getpid()); fh.flush(); " if pid_in_file else ""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, time\n"
        f"fh = open({str(lock)!r}, 'a+'); fcntl.flock(fh, fcntl.LOCK_EX); {write}print('held', flush=True); "
        "time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_benchmark_left_running_is_stopped_before_the_lock_is_taken(tmp_path):
    lock = tmp_path / bp.LOCK_FILE
    holder = _holder(lock)
    killed = []

    def kill(pid):
        killed.append(pid)
        holder.kill()
        holder.wait()

    d = bp.BenchDir(str(tmp_path))
    fh, stopped = d.hold(kill, wait_s=5)
    try:
        assert killed == [holder.pid] and stopped == holder.pid
        assert lock.read_text().strip() == str(os.getpid())
    finally:
        fh.close()
    # free: taken at once, nobody stopped
    fh, stopped = d.hold(kill)
    fh.close()
    assert stopped is None and killed == [holder.pid]


def test_a_holder_that_does_not_stop_is_an_error(tmp_path):
    holder = _holder(tmp_path / bp.LOCK_FILE, pid_in_file=False)
    clock, sleep = _fake_time()
    try:
        with pytest.raises(RuntimeError, match="another benchmark holds .* did not stop within 0 s"):
            bp.BenchDir(str(tmp_path)).hold(lambda pid: None, clock, sleep, wait_s=0.3)
    finally:
        holder.kill()
        holder.wait()


def test_a_gated_benchmark_waits_for_go_and_a_stop_wins(tmp_path):
    clock = iter(range(1000)).__next__  # one second per look
    d = bp.BenchDir(str(tmp_path))
    assert d.wait_gate(5, clock, lambda s: None) == "timeout"
    (tmp_path / bp.GO_FILE).write_text("opened\n")
    assert d.wait_gate(5, clock, lambda s: None) == "go"
    (tmp_path / bp.STOP_FILE).write_text("asked\n")
    assert d.wait_gate(5, clock, lambda s: None) == "stop"


def test_a_jobs_gate_opens_only_once_its_own_progress_is_there(tmp_path):
    d = bp.BenchDir(str(tmp_path))
    results = tmp_path / "job.results"
    results.write_text('{"started": 1}')
    os.utime(results, (200.0, 200.0))
    # no progress document yet: the job has not planned (and would clear a go file written now)
    assert d.open_gate(str(results), 300.0) is False
    assert not (tmp_path / bp.GO_FILE).exists()
    # a document an earlier run left (started before this job's results file)
    d.write_progress(bp.new([(1, 4)], {}, pid=1, started=150.0))
    assert d.open_gate(str(results), 300.0) is False
    assert not (tmp_path / bp.GO_FILE).exists()
    # this job's own document: opened, once
    d.write_progress(bp.new([(1, 4)], {}, pid=2, started=200.02))
    assert d.open_gate(str(results), 300.0) is True
    assert (tmp_path / bp.GO_FILE).read_text() == "gate opened at 300.000\n"
    assert d.open_gate(str(results), 301.0) is True
    assert (tmp_path / bp.GO_FILE).read_text() == "gate opened at 300.000\n"
    assert d.wait_gate(5, time.monotonic, lambda s: None) == "go"
    # with the job's key, a later job's document in the same directory is not the job's: its gate stays shut
    (tmp_path / bp.GO_FILE).unlink()
    d.write_progress(bp.new([(1, 4)], {}, pid=3, started=260.0, key="next"))
    assert d.open_gate(str(results), 303.0, key="this") is False
    assert not (tmp_path / bp.GO_FILE).exists()
    assert d.open_gate(str(results), 303.0, key="next") is True
    # a results file that is gone (the job was consumed): no gate to open
    assert bp.BenchDir(str(tmp_path / "gone")).open_gate(str(tmp_path / "missing.results"), 302.0) is False


def test_a_job_whose_controller_stopped_polling_is_told_so(tmp_path):
    """#37: after a double Ctrl-C or an API cancel nobody polls the job; it stops itself after controller_timeout
    (never before its gate opened, never with a timeout of 0)."""
    d = bp.BenchDir(str(tmp_path))
    assert d.controller_gone(600, now=10_000.0) is False  # the gate is not open yet
    _open(tmp_path, d, 1000.0)
    os.utime(tmp_path / bp.GO_FILE, (1000.0, 1000.0))
    assert d.controller_gone(600, now=1500.0) is False
    assert d.controller_gone(600, now=1700.0) is True
    d.beat(1650.0)
    assert d.controller_gone(600, now=1700.0) is False
    assert d.controller_gone(600, now=2300.0) is True
    assert d.controller_gone(0, now=99_999.0) is False


def test_the_progress_and_the_readers_token_round_trip(tmp_path):
    d = bp.BenchDir(str(tmp_path))
    assert d.read_progress() is None and d.read_seen() is None  # nothing written yet
    (tmp_path / bp.PROGRESS_FILE).write_text("{half")
    assert d.read_progress() is None  # not a progress document
    doc = bp.update(bp.new([(1, 4)], {}, pid=1, started=100.0), 1, "running")
    d.write_progress(doc)
    assert d.read_progress() == doc
    d.write_seen(doc)
    assert (tmp_path / (bp.PROGRESS_FILE + bp.SEEN_SUFFIX)).exists()
    assert d.read_seen() == bp.seen_token(doc) and not bp.newer(d.read_progress(), d.read_seen())
    d.write_progress(bp.update(doc, 1, "done"))
    assert bp.newer(d.read_progress(), d.read_seen())


def test_a_stop_is_asked_read_and_cleared_with_the_other_requests(tmp_path):
    d = bp.BenchDir(str(tmp_path))
    assert not d.stop_asked() and d.gate() is None
    d.ask_stop(12.5)
    assert d.stop_asked() and (tmp_path / bp.STOP_FILE).read_text() == "asked at 12.500\n"
    _open(tmp_path, d, 13.0)
    assert d.gate_open() and d.gate() == "stop"  # a stop wins over an open gate
    d.beat(14.0)
    d.clear_requests()  # a new run: the earlier run's stop, go and heartbeat are gone, its progress is not
    assert not d.stop_asked() and not d.gate_open() and not (tmp_path / bp.HEARTBEAT_FILE).exists()
    assert d.read_progress() is not None
    d.clear_requests()  # nothing to clear is no error


def test_a_stop_that_comes_while_the_gate_is_shut_ends_the_wait(tmp_path):
    d = bp.BenchDir(str(tmp_path))
    clock, tick = _fake_time()
    looks = []

    def sleep(s):
        looks.append(s)
        if len(looks) == 3:
            d.ask_stop(1.0)
        tick(s)

    assert d.wait_gate(600, clock, sleep) == "stop" and len(looks) == 3
    assert looks == [bp.GATE_POLL_S] * 3


def test_the_gate_never_opens_for_another_jobs_document(tmp_path):
    d = bp.BenchDir(str(tmp_path))
    results = _own_job(tmp_path, d, key="this")
    d.write_progress(bp.new([(1, 4)], {}, pid=1, started=400.0, key="later"))  # a later job took the directory
    assert d.open_gate(results, 500.0, key="this") is False and not d.gate_open()
    clock, sleep = _fake_time()
    assert d.wait_gate(1.0, clock, sleep) == "timeout"
    d.write_progress(bp.new([(1, 4)], {}, pid=1, started=400.0, key="this"))
    assert d.open_gate(results, 501.0, key="this") is True and d.wait_gate(1.0, clock, sleep) == "go"


def test_the_lock_is_exclusive(tmp_path):
    d = bp.BenchDir(str(tmp_path))
    fh, stopped = d.hold(lambda pid: pytest.fail("nobody held it"))
    try:
        assert stopped is None
        # a second benchmark in the same directory, even in this process, does not get it: it asks the holder
        # (whose pid is in the file) to stop, once, and gives up after wait_s
        asked = []
        clock, sleep = _fake_time()
        with pytest.raises(RuntimeError, match="another benchmark holds"):
            bp.BenchDir(str(tmp_path)).hold(asked.append, clock, sleep, wait_s=1.0)
        assert asked == [os.getpid()]
        # nor does another process
        probe = subprocess.run([sys.executable, "-c", (
            "import fcntl, sys\n"
            f"fh = open({str(tmp_path / bp.LOCK_FILE)!r}, 'a+')\n"
            "try:\n    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept OSError:\n    sys.exit(3)\n")])
        assert probe.returncode == 3
    finally:
        fh.close()
    fh, stopped = d.hold(lambda pid: pytest.fail("the lock was given back"))  # free once its file is closed
    fh.close()


def test_no_module_names_the_directorys_files_but_bench_dir():
    """BenchDir is their one owner: a module that built their paths itself would read or write them past it."""
    names = ("PROGRESS_FILE", "SEEN_SUFFIX", "LOCK_FILE", "STOP_FILE", "GO_FILE", "HEARTBEAT_FILE")
    for module in sorted((REPO / "plugins" / "modules").glob("*.py")):
        text = module.read_text()
        assert not [n for n in names if "bench_progress." + n in text], module.name
