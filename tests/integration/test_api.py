"""The Python API and the CLI on a provisioned simulated host: typed results equal to points.jsonl, events in
order naming every phase, a stop mid-point leaving an interrupted record and a restored, ready server, the
CLI's --json and its live display under a terminal, and the docs' example executed as written."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

import moesweep
from moesweep.sim.presets import SIM_FAST, SMALL_BENCH

pytestmark = pytest.mark.hosts

SETTINGS = {"sglang_server_extra_environment": dict(SIM_FAST), "sglang_server_stall_timeout": 5,
            "sglang_server_ready_timeout": 120, **SMALL_BENCH}


def test_the_docs_example_runs_as_written(bench_cluster, tmp_path, capsys):
    text = (REPO / "docs" / "api.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    exec(compile(code, "docs/api.md", "exec"), {"INVENTORY": str(bench_cluster.inventory),
                                                 "RESULTS": str(tmp_path), "SETTINGS": SETTINGS})
    assert "flashinfer_cutlass passed" in capsys.readouterr().out


def test_typed_results_equal_the_records_and_events_come_in_order(bench_cluster, tmp_path):
    events = list(moesweep.iter_sweep(str(bench_cluster.inventory), ["flashinfer_cutlass", "triton"],
                                      results_dir=tmp_path, **SETTINGS))
    kinds = [e.kind for e in events]
    assert kinds[0] == "plan" and kinds[-1] == "done"
    result = events[-1].detail["result"]
    lines = [json.loads(line) for line in (result.directory / "points.jsonl").read_text().splitlines()]
    assert [p.record for p in result.points] == [r for r in lines if r["kind"] == "point"]
    assert [r.record for r in result.restores] == [r for r in lines if r["kind"] == "restore"]
    assert all(isinstance(p, moesweep.PointResult) and p.passed for p in result.points)
    for name in ("flashinfer_cutlass", "triton"):
        mine = [e for e in events if e.point == name and e.kind != "restore"]  # the restore names its point too
        seq = [e.kind for e in mine]
        assert seq[0] == "point_started" and seq[-1] == "point_finished", seq
        phases = [e.phase for e in mine if e.kind == "phase"]
        # A point restarts the server only when its unit differs from the running one: the first point may find
        # the host already on its backend (an earlier test left it there); triton always follows another backend.
        wanted = ("preflight", "resume", "configure", "readiness", "smoke", "benchmark", "record")
        for phase in wanted + (("restart",) if name == "triton" else ()):
            assert phase in phases, (name, phases)
        assert phases.index("preflight") < phases.index("readiness") < phases.index("benchmark")
        levels = [e.detail["concurrency"] for e in mine if e.kind == "level"]
        assert levels == [1, 4]
        # each level's start and end came while the benchmark ran (the async job's polls), in order
        live = [(e.kind, e.detail["concurrency"]) for e in mine if e.kind in ("level_started", "level")]
        assert live == [("level_started", 1), ("level", 1), ("level_started", 4), ("level", 4)], live
        ends = {e.detail["concurrency"]: e.at for e in mine if e.kind == "level"}
        assert ends[1] < ends[4] - 1.0, ends  # c1's figures came a level's time before the benchmark ended
        assert all(e.detail["figures"]["output_throughput"] > 0 for e in mine if e.kind == "level")
    assert kinds.index("restore") > max(i for i, e in enumerate(events) if e.kind == "point_finished")
    best = result.best(4)
    assert best is not None and best.output_throughput(4) > 0
    assert result.restores[-1].point == best.point and result.restores[-1].status == "passed"


def test_a_stop_mid_point_records_interrupted_and_restores_a_ready_server(bench_cluster, tmp_path):
    started = []

    def stop_after_step():
        return "triton" in started

    for event in moesweep.iter_sweep(str(bench_cluster.inventory), ["flashinfer_cutlass", "triton"],
                                     results_dir=tmp_path, stop_after_step=stop_after_step, **SETTINGS):
        if event.kind == "point_started":
            started.append(event.point)
        if event.kind == "done":
            result = event.detail["result"]
    status = {p.point: p.status for p in result.points}
    assert status == {"flashinfer_cutlass": "passed", "triton": "interrupted"}, status
    assert result.interrupted
    triton = next(p for p in result.points if p.point == "triton")
    assert "asked to stop" in (triton.record["failed_msg"] or "")
    restore = result.restores[-1]
    assert restore.status == "passed" and restore.point == "flashinfer_cutlass"
    host = bench_cluster.names[0]
    assert bench_cluster.sh(host, "systemctl is-active sglang.service").stdout.strip() == "active"
    line = bench_cluster.sh(host, "systemctl show sglang.service -p ExecStart --value").stdout
    assert "--moe-runner-backend flashinfer_cutlass" in line
    assert not (result.directory / ".stop").exists()


def test_a_stop_during_the_benchmark_ends_it_after_the_running_level_and_a_resume_keeps_the_levels(bench_cluster,
                                                                                                  tmp_path):
    """Asked to stop while a level runs, the benchmark stops after that level: the point is interrupted with the
    levels that ended in its record, the host is restored, and the resumed sweep runs only the level left."""
    # c2 runs longer than one poll's longest wait (roles/sglang_bench/vars: 10 s): the stop reaches the host while
    # c2 runs whichever poll is in flight when it is asked
    settings = dict(SETTINGS, sglang_bench_concurrency=[1, 2, 4], sglang_bench_num_prompts=[4, 30, 8])
    asked = []

    def stop_after_step():
        return bool(asked)

    events = []
    for event in moesweep.iter_sweep(str(bench_cluster.inventory), ["triton"], results_dir=tmp_path,
                                     sweep_id="stop-mid-bench", rerun=True, stop_after_step=stop_after_step,
                                     **settings):
        events.append(event)
        if event.kind == "level_started" and event.detail["concurrency"] == 2:
            asked.append(event.at)
    result = events[-1].detail["result"]
    triton = next(p for p in result.points if p.point == "triton")
    assert triton.status == "interrupted", (triton.status, triton.record.get("failed_msg"))
    assert result.interrupted and "asked to stop" in (triton.record["failed_msg"] or "")
    levels = {lv.concurrency: lv for lv in triton.levels}
    assert levels[1].ok and levels[2].ok, triton.levels  # the running level ended and was kept
    assert not levels[4].ok and "asked to stop" in levels[4].errors[0]["error"]
    assert result.restores[-1].status == "passed"
    host = bench_cluster.names[0]
    assert bench_cluster.sh(host, "systemctl is-active sglang.service").stdout.strip() == "active"
    # the resumed sweep runs the point again, keeping the two levels that passed: only c4 runs now
    resumed = moesweep.sweep(str(bench_cluster.inventory), ["triton"], results_dir=tmp_path,
                             sweep_id="stop-mid-bench", resume=True, **settings)
    again = next(p for p in resumed.points if p.point == "triton")
    assert again.passed, again.record.get("failed_msg")
    reused = {lv["concurrency"]: bool(lv.get("reused")) for lv in again.record["benchmark"]["levels"]}
    assert reused == {1: True, 2: True, 4: False}, reused


def _settings_file(tmp_path: Path) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(SETTINGS))
    return path


def test_the_cli_runs_the_same_sweep_and_its_records_have_the_playbooks_keys(bench_cluster, tmp_path):
    moesweep_bin = str(Path(sys.executable).parent / "moesweep")
    settings = _settings_file(tmp_path)
    cli = subprocess.run([moesweep_bin, "sweep", "-i", str(bench_cluster.inventory), "--backends",
                          "flashinfer_cutlass", "--results", str(tmp_path / "cli"), "-e", f"@{settings}", "--json"],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert cli.returncode == 0, cli.stderr[-3000:]
    out = json.loads(cli.stdout)
    assert out["exit"] == 0 and out["points"][0]["status"] == "passed" and out["points"][0]["levels"]
    from moesweep.runner import run_ansible

    play = run_ansible("ansible-playbook", "-i", str(bench_cluster.inventory), "sweep.yml", "-e",
                       "backend=flashinfer_cutlass", "-e", f"@{_settings_file(tmp_path)}", "-e",
                       f"results_dir={tmp_path / 'play'}", check=False)
    assert play.returncode == 0, play.stdout[-3000:]

    def record(root):
        path = next(root.glob("*/points.jsonl"))
        return [json.loads(x) for x in path.read_text().splitlines() if '"kind": "point"' in x][-1]

    a, b = record(tmp_path / "cli"), record(tmp_path / "play")
    assert set(a) == set(b) and set(a["benchmark"]) == set(b["benchmark"]) and set(a["launch"]) == set(b["launch"])


def test_the_live_display_updates_during_a_benchmark_level(bench_cluster, tmp_path):
    """Under a terminal the CLI draws a live table (rich) whose phase and level cells change while it runs."""
    moesweep_bin = str(Path(sys.executable).parent / "moesweep")
    slow = dict(SETTINGS, sglang_bench_num_prompts=[16])
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(REPO)
        os.environ.update(COLUMNS="160", LINES="40", TERM="xterm")
        os.execv(moesweep_bin, [moesweep_bin, "sweep", "-i", str(bench_cluster.inventory), "--backends", "triton",
                                "--rerun", "--results", str(tmp_path / "r"), "-e", f"@{tmp_path / 'slow.json'}"])
    screen = b""
    deadline = time.monotonic() + 600
    snapshots = []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            screen += chunk
            snapshots.append(chunk)
    _, status = os.waitpid(pid, 0)
    text = screen.decode("utf-8", "replace")
    assert os.waitstatus_to_exitcode(status) == 0, text[-3000:]
    assert "moesweep sweep" in text and "triton" in text  # the table's title and row
    # the display was redrawn while the benchmark ran: the phase cell said benchmark with the levels that run, its
    # elapsed cell counted up during the level, and the level cell followed each level as it started and ended
    figure = re.search(r"c1 [0-9.]+ tok/s", text)
    assert "benchmark" in text and figure and text.index("benchmark") < figure.start(), text[-3000:]
    assert "levels c1, c4" in text
    assert text.index("c1 running (1/2)") < figure.start() < text.index("c4 running (2/2)"), text[-3000:]
    assert re.search(r"c1 [0-9.]+ tok/s, c4 [0-9.]+ tok/s", text), text[-3000:]
    ticks = {int(t) for t in re.findall(r"benchmark\W+(\d+) s\W", text[:figure.start()])}
    assert len(ticks) >= 3, (sorted(ticks), text[-3000:])
    assert len(snapshots) > 5
