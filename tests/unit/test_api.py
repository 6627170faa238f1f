"""moesweep.api's events from ansible-runner's: each benchmark level's start and end once, in order, while the
async benchmark job runs (its poller's runner_retry events) and from its final result for a level no poll saw
end; the CLI's display follows them."""

from __future__ import annotations

from moesweep import api
from moesweep.commands import sweep

WAIT = "moesweep.sweep.sglang_bench_wait"


def _poll(kind, levels, finished=False, final_levels=None):
    res = {"finished": finished, "progress": {"version": 1, "levels": levels}}
    if final_levels is not None:
        res["levels"] = final_levels
    return {"event": kind, "event_data": {"host": "h1", "task_action": WAIT, "res": res}}


def _level(c, state, **kw):
    return dict({"concurrency": c, "num_prompts": 4 * c, "state": state}, **kw)


def test_levels_start_and_end_once_each_in_order():
    state = {"h1": "triton"}
    polls = [
        _poll("runner_retry", [_level(1, "running"), _level(4, "pending")]),
        _poll("runner_retry", [_level(1, "running"), _level(4, "pending")]),  # a heartbeat: nothing new
        # c1 ended and c4 started between two polls: both are told, c1's end first
        _poll("runner_retry", [_level(1, "done", ok=True, figures={"output_throughput": 40.0}),
                               _level(4, "running")]),
        _poll("runner_on_ok", [_level(1, "done", ok=True), _level(4, "done", ok=True)], finished=True,
              final_levels=[{"concurrency": 1, "ok": True, "diagnosis": {"verdict": "launch_bound"}},
                            {"concurrency": 4, "ok": True, "figures": {"output_throughput": 150.0},
                             "diagnosis": {"verdict": "launch_bound"}}]),
    ]
    events = [e for ev in polls for e in api.events_from_runner(ev, state)]
    # the benchmark phase once, with its first level (a job that never ran a level never began its benchmark)
    assert [(e.kind, e.phase or e.detail["concurrency"]) for e in events] == [
        ("phase", "benchmark"), ("level_started", 1), ("level", 1), ("level_started", 4), ("level", 4)]
    assert all(e.point == "triton" and e.host == "h1" for e in events)
    assert events[2].detail["figures"] == {"output_throughput": 40.0}  # live: the poll's brief figures
    assert events[4].detail["diagnosis"] == {"verdict": "launch_bound"}  # from the job's full result


def test_a_job_that_finished_before_any_poll_saw_a_level_still_tells_every_level():
    state = {"h1": "auto"}
    ev = _poll("runner_on_ok", [_level(1, "done", ok=True), _level(8, "reused", ok=True)], finished=True,
               final_levels=[{"concurrency": 1, "ok": True}, {"concurrency": 8, "ok": True, "reused": True}])
    events = api.events_from_runner(ev, state)
    # a reused level (passed in an interrupted run before) did not run now: neither started nor ended
    assert [(e.kind, e.phase or e.detail["concurrency"]) for e in events] == [
        ("phase", "benchmark"), ("level_started", 1), ("level", 1)]


def test_levels_a_stopped_or_cancelled_job_never_began_are_not_told():
    state = {"h1": "auto"}
    ev = _poll("runner_on_ok", [_level(1, "done", ok=True), _level(4, "pending")], finished=True,
               final_levels=[{"concurrency": 1, "ok": True}, {"concurrency": 4, "ok": False, "wall_s": None}])
    assert [(e.kind, e.phase or e.detail["concurrency"]) for e in api.events_from_runner(ev, state)] == [
        ("phase", "benchmark"), ("level_started", 1), ("level", 1)]
    # a job cancelled at its gate (its smoke check failed): no level at all, and no benchmark phase
    state = {"h1": "triton"}
    ev = _poll("runner_on_ok", [_level(1, "pending"), _level(4, "pending")], finished=True,
               final_levels=[{"concurrency": 1, "ok": False}, {"concurrency": 4, "ok": False}])
    assert api.events_from_runner(ev, state) == []


def test_each_point_tells_its_own_levels():
    state = {"h1": "triton"}
    api.events_from_runner(_poll("runner_retry", [_level(1, "done", ok=True)]), state)
    state["h1"] = "auto"  # the next point on the host
    events = api.events_from_runner(_poll("runner_retry", [_level(1, "running")]), state)
    assert [(e.kind, e.point) for e in events] == [("phase", "auto"), ("level_started", "auto")]


def test_the_display_shows_the_running_level_then_its_figure(capsys):
    shown = sweep.Progress(live=False)
    shown.update(api.Event("plan", detail={"concurrency": [1, 4]}))
    shown.update(api.Event("point_started", host="h1", point="triton"))
    shown.update(api.Event("phase", host="h1", point="triton", phase="benchmark"))
    row = shown.rows[("h1", "triton")]
    assert row["level"] == "levels c1, c4"
    shown.update(api.Event("level_started", host="h1", point="triton", detail={"concurrency": 1, "num_prompts": 4}))
    assert row["level"] == "c1 running (1/2)"
    shown.update(api.Event("level", host="h1", point="triton",
                           detail={"concurrency": 1, "ok": True, "figures": {"output_throughput": 40.04}}))
    shown.update(api.Event("level_started", host="h1", point="triton", detail={"concurrency": 4, "num_prompts": 8}))
    assert row["level"] == "c1 40.0 tok/s, c4 running (2/2)"
    shown.update(api.Event("level", host="h1", point="triton", detail={"concurrency": 4, "ok": False}))
    assert row["level"] == "c1 40.0 tok/s, c4 failed"
    err = capsys.readouterr().err
    assert "h1 triton: level c1 started, 4 prompts (1/2)" in err and "h1 triton: level c4 failed" in err


def _task(kind, action, res=None, name="any name", **data):
    """A runner event of a task of h1 running module ``action`` (``resolved_action`` and ``task_action``)."""
    event_data = dict({"host": "h1", "task": name, "resolved_action": action, "task_action": action}, **data)
    if res is not None:
        event_data["res"] = res
    return {"event": kind, "event_data": event_data}


def test_phases_come_from_the_module_a_task_runs_never_from_its_name():
    import yaml
    from helpers.paths import REPO

    state = {"h1": "triton"}
    tasks = yaml.safe_load((REPO / "roles/sglang_server/tasks/run.yml").read_text())
    # the point's restart is the restart entry point, imported (no include task that starts at every point)
    assert [t.get("ansible.builtin.import_tasks") for t in tasks if "ansible.builtin.import_tasks" in t] == [
        "restart.yml"]
    assert not [t for t in tasks if "ansible.builtin.include_tasks" in t]
    (block,) = yaml.safe_load((REPO / "roles/sglang_server/tasks/restart.yml").read_text())
    calls = [t for t in block["block"] if api.READY in t or api.RESTART in t]
    ready, restart = calls  # judge, restart
    # an include (the node group's choreography) starts, and is skipped, at every point: it tells no phase
    includes = [t for t in block["block"] if "ansible.builtin.include_tasks" in t]
    assert [t["ansible.builtin.include_tasks"] for t in includes] == ["nodes.yml"]
    for task in includes:
        assert api.events_from_runner(_task("runner_on_start", "ansible.builtin.include_tasks", name=task["name"]),
                                      state) == []
    assert api.READY in ready
    # the judge: the same phase whatever its task is named
    for name in (ready["name"], "Judge the running server", "anything"):
        (ev,) = api.events_from_runner(_task("runner_on_start", api.READY, name=name), {"h1": "triton"})
        assert (ev.kind, ev.phase, ev.detail) == ("phase", "readiness", {"task": name, "action": api.READY})
    # the restart: one call that stops, waits for the release, starts and waits for that run - both phases at its
    # start, in order, whatever its task is named; its result tells nothing more
    assert api.RESTART in restart
    for name in (restart["name"], "anything"):
        told = api.events_from_runner(_task("runner_on_start", api.RESTART, name=name), {"h1": "triton"})
        assert [(e.kind, e.phase, e.detail) for e in told] == [
            ("phase", "restart", {"task": name, "action": api.RESTART}),
            ("phase", "readiness", {"task": name, "action": api.RESTART})]
    assert api.phases_of(api.RESTART, {"released": {"stopped": True, "released": True}, "state": "ready"}) == ()
    assert api.phases_of(api.READY, {"state": "ready"}) == ()  # a judge
    assert api.phases_of("moesweep.sweep.sglang_start") == ()  # a rank's start: its group's restart was told
    assert api.phases_of("moesweep.sweep.sglang_preflight") == ("preflight",)
    # a node group restarts when its barrier decides so, before any rank stops
    assert api.phases_of(api.NODES, {"check": "restart", "restart": True}) == ("restart",)
    assert api.phases_of(api.NODES, {"check": "restart", "restart": False}) == ()
    assert api.phases_of("ansible.builtin.systemd_service") == ()  # the early stop, a rank's stop: many uses
    # the resolved name first (a short or redirected action reads as its module), else the action as written
    short = {"event": "runner_on_start", "event_data": {"host": "h1", "task": "t", "task_action": "sglang_ready",
                                                        "resolved_action": api.READY}}
    assert [e.phase for e in api.events_from_runner(short, {"h1": "triton"})] == ["readiness"]
    written = {"event": "runner_on_start", "event_data": {"host": "h1", "task": "t", "task_action": api.READY}}
    assert [e.phase for e in api.events_from_runner(written, {"h1": "triton"})] == ["readiness"]


def test_a_points_phases_in_order_from_its_modules():
    """One host's point that restarts, as ansible-runner tells it: each phase once, in the order the point enters
    it; a module that serves several steps (sweep_record) tells its phase by its call's result."""
    record = {"kind": "point", "point": "triton", "status": "passed"}
    events = [
        _task("runner_on_start", api.RECORD),
        _task("runner_on_ok", api.RECORD, {"moesweep_event": "point_started", "point": "triton"}),
        _task("runner_on_start", "ansible.builtin.assert"),
        _task("runner_on_start", "moesweep.sweep.sglang_preflight"),
        _task("runner_on_start", api.RECORD),
        _task("runner_on_ok", api.RECORD, {"moesweep_event": "resume", "skip": False, "point": "triton"}),
        _task("runner_on_start", "moesweep.sweep.sglang_unit"),
        _task("runner_on_start", api.RECORD),  # the interconnect: measured before
        _task("runner_on_ok", api.RECORD, {"found": True}),
        _task("runner_on_start", "moesweep.sweep.sglang_bench"),  # the gated benchmark job, before the restart
        _task("runner_on_start", "ansible.builtin.include_tasks"),  # the judge: skipped
        _task("runner_on_start", "ansible.builtin.include_tasks"),  # the restart
        _task("runner_on_start", api.RESTART),
        _task("runner_on_ok", api.RESTART, {"state": "ready", "started": True, "released": {"stopped": True}}),
        _task("runner_on_start", api.RECORD),  # stop_check
        _task("runner_on_ok", api.RECORD, {}),
        _task("runner_on_start", "moesweep.sweep.sglang_smoke"),
        _task("runner_on_start", "moesweep.sweep.sglang_accuracy"),
        _task("runner_on_start", api.BENCH_WAIT),
        _task("runner_retry", api.BENCH_WAIT, {"finished": False, "progress": {"levels": [_level(1, "running")]}}),
        _task("runner_on_ok", api.BENCH_WAIT, {"finished": True, "progress": {"levels": [_level(1, "done")]},
                                               "levels": [{"concurrency": 1, "ok": True}]}),
        _task("runner_on_start", api.RECORD),
        _task("runner_on_ok", api.RECORD, {"moesweep_event": "record", "moesweep_record": record}),
    ]
    state: dict = {}
    told = [e for ev in events for e in api.events_from_runner(ev, state)]
    # one host's restart is one call (sglang_restart): restart, then readiness, when it starts
    assert [e.phase or e.kind for e in told] == [
        "point_started", "preflight", "resume", "configure", "restart", "readiness", "smoke", "accuracy",
        "benchmark", "level_started", "level", "record", "point_finished"]
    assert all((e.host, e.point) == ("h1", "triton") for e in told)

    # a point that passed before: its resume check, then skipped
    state = {}
    told = [e for ev in events[:4] + [_task("runner_on_ok", api.RECORD, {
        "moesweep_event": "resume", "skip": True, "point": "triton", "moesweep_record": record})]
        for e in api.events_from_runner(ev, state)]
    assert [e.phase or e.kind for e in told] == ["point_started", "preflight", "resume", "skipped"]

    # a node group's rank: the group's decision tells the restart (its stop, release wait and starts); its wait the
    # readiness
    state = {"h1": "triton"}
    group = [_task("runner_on_ok", api.NODES, {"check": "restart", "restart": True}),
             _task("runner_on_start", "ansible.builtin.systemd_service"),
             _task("runner_on_start", "moesweep.sweep.gpu_released"),
             _task("runner_on_start", "moesweep.sweep.sglang_start"),
             _task("runner_on_start", "moesweep.sweep.sglang_start"),
             _task("runner_on_start", api.READY), _task("runner_on_ok", api.READY, {"state": "ready"}),
             _task("runner_on_ok", api.NODES, {"check": "ready", "state": "ready"})]
    told = [e for ev in group for e in api.events_from_runner(ev, state)]
    assert [e.phase for e in told] == ["restart", "readiness"]
    assert told[1].detail["action"] == api.READY


def test_every_module_the_api_reads_is_one_a_point_runs():
    import yaml
    from helpers.paths import REPO

    def actions(node):
        if isinstance(node, list):
            for item in node:
                yield from actions(item)
        elif isinstance(node, dict):
            yield from (key for key in node if key.startswith("moesweep.sweep."))
            for key in ("block", "rescue", "always"):
                yield from actions(node.get(key))

    files = [*REPO.glob("playbooks/tasks/*.yml"), *REPO.glob("roles/*/tasks/*.yml")]
    run = {a for f in files for a in actions(yaml.safe_load(f.read_text()))}
    read = {*api.START_PHASES, api.READY, api.RESTART, api.RECORD, api.NODES, api.BENCH_WAIT, api.STAGE_WAIT}
    assert read <= run, read - run
    assert {phase for phases in api.START_PHASES.values() for phase in phases} <= set(api.PHASES)
    # the phases a task tells at its start, in the order a point enters them
    assert all(list(phases) == sorted(phases, key=api.PHASES.index) for phases in api.START_PHASES.values())


def test_the_accuracy_stage_is_a_phase_and_a_point_result_field():
    import yaml
    from helpers.paths import REPO

    tasks = yaml.safe_load((REPO / "roles/sglang_bench/tasks/main.yml").read_text())
    block = next(t for t in tasks if t["name"].startswith("Accuracy"))
    assert any("moesweep.sweep.sglang_accuracy" in t for t in block["block"])
    assert api.phases_of("moesweep.sweep.sglang_accuracy") == ("accuracy",)
    rec = {"kind": "point", "host": "h", "point": "triton", "status": "bad_accuracy",
           "accuracy": {"state": "bad_accuracy", "accuracy": 0.6}}
    point = api.PointResult.from_record(rec)
    assert point.accuracy == 0.6 and point.accuracy_state == "bad_accuracy" and not point.passed
def _stats_record(point, value, half_width_rel, p99):
    stats = {"steady_output_throughput": {"value": value, "low": value * (1 - half_width_rel),
                                          "high": value * (1 + half_width_rel), "half_width": value * half_width_rel,
                                          "half_width_rel": half_width_rel, "requests": 64, "steady_requests": 60},
             "latency": {"ttft": {"n": 64, "p99": {"value": p99, "low": p99 * 0.9, "high": None}}},
             "precision_target": 0.02}
    level = {"concurrency": 64, "ok": True, "num_prompts": 64, "stats": stats,
             "figures": {"output_throughput": value * 0.97, "p99_ttft_ms": p99}}
    return {"schema": "moesweep.point/2", "kind": "point", "sweep_id": "s", "host": "h", "point": point,
            "status": "passed", "benchmark": {"levels": [level]}}


def test_results_carry_intervals_sample_counts_and_ties(tmp_path):
    import json

    from moesweep import api

    recs = [_stats_record("a", 225.0, 0.01, 900.0), _stats_record("b", 226.0, 0.01, 800.0),
            _stats_record("c", 200.0, 0.01, 700.0),
            {"schema": "moesweep.point/2", "kind": "restore", "sweep_id": "s", "host": "h", "point": "b",
             "status": "passed", "action": "point", "ties": ["a"], "reason": "r"}]
    (tmp_path / "points.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    res = api.load_results(tmp_path)
    lv = res.points[0].level(64)
    assert lv.steady_throughput["low"] < 225.0 < lv.steady_throughput["high"] and lv.num_prompts == 64
    assert lv.latency("ttft") == {"value": 900.0, "low": 810.0, "high": None, "n": 64}
    assert res.best(64).point == "b" and [p.point for p in res.ties(64)] == ["a"]  # c is 11 % slower: not a tie
    assert res.restores[0].ties == ["a"]
    sla = res.sla(ttft_p99_ms=850.0)
    assert sla["a"]["concurrency"] is None and sla["b"]["concurrency"] == 64 and sla["b"]["confident"] is None


STAGE_WAIT = "moesweep.sweep.model_stage_wait"


def _stage(kind, res):
    return {"event": kind, "event_data": {"host": "h1", "task_action": STAGE_WAIT, "res": res}}


def test_each_poll_of_the_staging_job_is_a_stage_event_then_its_end():
    state = {"h1": "triton"}
    msg = "org/m: 2.0 of 4.0 GB, 100.0 MB/s, about 20 s left"
    running = {"finished": False, "progress": {"bytes_done": 2 * 10 ** 9, "bytes_total": 4 * 10 ** 9,
                                               "rate_bytes_s": 1e8, "eta_s": 20.0, "msg": msg}}
    events = api.events_from_runner(_stage("runner_retry", running), state)
    assert [(e.kind, e.host, e.point) for e in events] == [("stage", "h1", "triton")]
    assert events[0].detail == dict(running["progress"], finished=False)
    done = {"finished": True, "changed": True, "repo_id": "org/m", "bytes": 4 * 10 ** 9, "downloaded": True,
            "progress": None}
    (end,) = api.events_from_runner(_stage("runner_on_ok", done), state)
    assert end.kind == "stage" and end.detail["finished"] is True and end.detail["downloaded"] is True
    assert end.detail["bytes_done"] == end.detail["bytes_total"] == 4 * 10 ** 9
    assert end.detail["msg"] == "org/m: staged (4.0 GB), downloaded now"
    # a re-run with the model staged: its first poll is its end, nothing downloaded
    (again,) = api.events_from_runner(_stage("runner_on_ok", dict(done, changed=False, downloaded=False)), state)
    assert again.detail["msg"] == "org/m: staged (4.0 GB), already on the host"
    # a tiny model is told in the unit that fits it, not as 0.0 GB
    (tiny,) = api.events_from_runner(_stage("runner_on_ok", dict(done, bytes=1_100_000)), state)
    assert tiny.detail["msg"] == "org/m: staged (1.1 MB), downloaded now"


def test_the_display_shows_the_downloads_progress(capsys):
    shown = sweep.Progress(live=False)
    shown.update(api.Event("point_started", host="h1", point="triton"))
    msg = "org/m: 2.0 of 4.0 GB, 100.0 MB/s, about 20 s left"
    shown.update(api.Event("stage", host="h1", point="triton", detail={"msg": msg, "finished": False}))
    row = shown.rows[("h1", "triton")]
    assert row["phase"] == "stage" and row["level"] == msg
    shown.update(api.Event("stage", host="h1", point="triton",
                           detail={"msg": "org/m: staged (4.0 GB), downloaded now", "finished": True}))
    assert row["level"] == ""
    err = capsys.readouterr().err
    assert "h1 triton: " + msg in err and "h1 triton: org/m: staged (4.0 GB), downloaded now" in err
