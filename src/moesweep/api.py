"""moesweep's Python API: sweeps as typed results, driven through ansible-runner.

Every function runs the collection's playbooks with ansible-runner (``project_dir`` = the repository
root, so its ``ansible.cfg`` applies and the ``moesweep.sweep.results`` callback records every point;
``private_data_dir`` outside the source tree, 0700, removed afterwards unless asked to keep it; one
``ident`` per run). Results are built from the records the callback writes (``points.jsonl``), never from
the playbook's text output. See docs/api.md.

    import moesweep
    result = moesweep.sweep("inventory/mine.yml", ["flashinfer_cutlass", "triton"])
    for point in result.points:
        print(point.host, point.point, point.status, point.output_throughput(64))
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import moesweep._collection  # noqa: F401  (puts the in-repo collection on sys.path)

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import secrets, stage_progress
from ansible_collections.moesweep.sweep.plugins.plugin_utils import matrix as _matrix
from ansible_collections.moesweep.sweep.plugins.plugin_utils import records as _records
from ansible_collections.moesweep.sweep.plugins.plugin_utils import status as _status

from moesweep._collection import REPO_ROOT

SWEEP_PLAYBOOK = "sweep.yml"
SITE_PLAYBOOK = "site.yml"
FACTS_PLAYBOOK = "playbooks/facts.yml"
CHECK_PLAYBOOK = "playbooks/check.yml"
# How soon a stop asked of a running sweep (the first Ctrl-C) becomes its stop file, which the playbook reads before
# each point and after each restart. ansible-runner asks its cancel callback only every pexpect_timeout (5 s): a
# restart that takes less than that would run past the check that should have stopped it.
STOP_POLL_S = 0.25


class MoesweepError(RuntimeError):
    """The sweep could not run at all (bad input, no host, ansible missing): the message names the fix."""


# ------------------------------------------------------------------------------------------------ results


@dataclass
class Level:
    """One benchmark level of a point (bench_serving's figures, telemetry summary, diagnosis)."""

    concurrency: int
    ok: bool
    figures: dict
    errors: list
    diagnosis: dict | None
    telemetry: dict | None
    joules_per_token: float | None
    # module_utils bench_stats: the steady-state throughput's interval, latency percentiles with sample counts and
    # intervals, the precision target and the one reached (docs/results.md, Precision); None in older records
    stats: dict | None = None
    num_prompts: int | None = None

    @property
    def steady_throughput(self) -> dict | None:
        """{value, low, high, half_width, half_width_rel, requests, steady_requests, batches, ...}: the output tok/s
        while every slot was busy and its 95 % interval, or None."""
        return (self.stats or {}).get("steady_output_throughput")

    def latency(self, name: str = "ttft", pct: int = 99) -> dict | None:
        """{value, low, high, n} of a latency percentile in ms (``name``: ttft, itl, tpot; ``pct``: 50, 90, 99)."""
        entry = ((self.stats or {}).get("latency") or {}).get(name) or {}
        iv = entry.get(f"p{pct}")
        return dict(iv, n=entry.get("n")) if isinstance(iv, dict) else None

    @classmethod
    def from_record(cls, level: dict) -> Level:
        return cls(concurrency=level.get("concurrency"), ok=bool(level.get("ok")), figures=level.get("figures") or {},
                   errors=level.get("errors") or [], diagnosis=level.get("diagnosis"),
                   telemetry=level.get("telemetry"), joules_per_token=level.get("joules_per_token"),
                   stats=level.get("stats") if isinstance(level.get("stats"), dict) else None,
                   num_prompts=level.get("num_prompts"))


@dataclass
class PointResult:
    """One recorded sweep point (docs/results.md); ``record`` is the record as written."""

    sweep_id: str
    host: str
    point: str
    backend: str | None
    status: str
    cause: str | None
    simulated: bool
    config_hash: str | None
    started: str | None
    finished: str | None
    seconds: float | None
    levels: list[Level]
    decisive_line: str | None
    record: dict = field(repr=False)
    # the accuracy stage: sglang's few-shot GSM8K share of correct answers and its verdict (ok, bad_accuracy, ...)
    accuracy: float | None = None
    accuracy_state: str | None = None
    # a launch matrix's cell: its value of each axis (empty for a point of -e backends)
    axes: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == _status.PASSED

    def level(self, concurrency: int) -> Level | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)

    def output_throughput(self, concurrency: int) -> float | None:
        """Output tok/s at that level, or None when the level failed or did not run (never a failed figure)."""
        lv = self.level(concurrency)
        return lv.figures.get("output_throughput") if lv and lv.ok else None

    @classmethod
    def from_record(cls, rec: dict) -> PointResult:
        readiness = rec.get("readiness") or {}
        return cls(sweep_id=rec.get("sweep_id"), host=rec.get("host"), point=rec.get("point"),
                   backend=rec.get("backend"), status=rec.get("status"), cause=rec.get("cause"),
                   simulated=bool(rec.get("simulated")), config_hash=rec.get("config_hash"),
                   started=rec.get("started"), finished=rec.get("finished"), seconds=rec.get("seconds"),
                   levels=[Level.from_record(lv) for lv in ((rec.get("benchmark") or {}).get("levels") or [])],
                   decisive_line=readiness.get("decisive_line") or rec.get("failed_msg"), record=rec,
                   accuracy=(rec.get("accuracy") or {}).get("accuracy"),
                   accuracy_state=(rec.get("accuracy") or {}).get("state"), axes=dict(rec.get("axes") or {}))


@dataclass
class RestoreResult:
    host: str
    action: str
    point: str | None
    status: str
    reason: str | None
    record: dict = field(repr=False)
    ties: list = field(default_factory=list)  # the points that tied with the one restored

    @classmethod
    def from_record(cls, rec: dict) -> RestoreResult:
        return cls(host=rec.get("host"), action=rec.get("action"), point=rec.get("point"), status=rec.get("status"),
                   reason=rec.get("reason"), record=rec, ties=rec.get("ties") or [])


@dataclass
class SweepResult:
    """A sweep's points (the latest record of each) and restore steps, from ``points.jsonl``."""

    sweep_id: str | None
    directory: Path | None
    points: list[PointResult]
    restores: list[RestoreResult]
    rc: int | None = None
    status: str | None = None
    interrupted: bool = False
    runner_dir: str | None = None
    # What this run did (None for results loaded from disk): the points it recorded or skipped and the restores it
    # recorded, from its own events, whether or not their records reached points.jsonl; its exit status reads these.
    run_points: list[PointResult] | None = None
    run_restores: list[RestoreResult] | None = None
    # The records of this run that could not be written to points.jsonl: where each was kept (or why not).
    unrecorded: list[str] = field(default_factory=list)

    @property
    def passed(self) -> list[PointResult]:
        return [p for p in self.points if p.passed]

    @property
    def failed(self) -> list[PointResult]:
        return [p for p in self.points if not p.passed]

    def best(self, concurrency: int, host: str | None = None) -> PointResult | None:
        from ansible_collections.moesweep.sweep.plugins.plugin_utils import summary

        rec = summary.best_point([p.record for p in self.points], concurrency, host=host)
        return PointResult.from_record(rec) if rec else None

    def ties(self, concurrency: int, host: str | None = None) -> list[PointResult]:
        """The points whose output tok/s at ``concurrency`` cannot be told apart from the best one's (the summary's
        tie rule, ``summary.TIE_RULE``); empty when the best stands alone."""
        from ansible_collections.moesweep.sweep.plugins.plugin_utils import summary

        _best, tied = summary.ranking([p.record for p in self.points], concurrency, host=host)
        return [PointResult.from_record(r) for r in tied]

    def sla(self, ttft_p99_ms: float | None = None, itl_p99_ms: float | None = None) -> dict:
        """{point: the SLA search of each passed point} - the highest concurrency among the levels it ran whose p99
        TTFT and ITL meet these SLOs (ms), and the highest that meets them by the 95 % upper bounds too
        (``summary.sla_concurrency``)."""
        from ansible_collections.moesweep.sweep.plugins.plugin_utils import summary

        return {p.point: summary.sla_concurrency(p.record, ttft_p99_ms, itl_p99_ms) for p in self.passed}

    def to_dataframe(self):
        """One row per point and level (pandas, an optional extra: pip install 'moesweep[dataframe]')."""
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise MoesweepError("to_dataframe needs pandas: pip install 'moesweep[dataframe]'") from exc
        rows = []
        for p in self.points:
            base = {"sweep_id": p.sweep_id, "host": p.host, "point": p.point, "backend": p.backend,
                    "status": p.status, "cause": p.cause, "simulated": p.simulated, "accuracy": p.accuracy}
            for lv in p.levels or [None]:
                row = dict(base)
                if lv is not None:
                    row.update(concurrency=lv.concurrency, level_ok=lv.ok, **{
                        k: lv.figures.get(k) for k in ("output_throughput", "total_throughput", "median_ttft_ms",
                                                       "p99_ttft_ms", "median_itl_ms", "p99_itl_ms")})
                    row["diagnosis"] = (lv.diagnosis or {}).get("verdict")
                    steady = lv.steady_throughput or {}
                    row.update(steady_output_throughput=steady.get("value"), steady_low=steady.get("low"),
                               steady_high=steady.get("high"), steady_half_width_rel=steady.get("half_width_rel"),
                               requests=lv.num_prompts)
                    for name in ("ttft", "itl"):
                        iv = lv.latency(name) or {}
                        row.update({f"p99_{name}_low_ms": iv.get("low"), f"p99_{name}_high_ms": iv.get("high"),
                                    f"{name}_samples": iv.get("n")})
                rows.append(row)
        return pd.DataFrame(rows)


def load_results(path: str | os.PathLike) -> SweepResult:
    """A sweep's results from its directory (``results/<sweep_id>``) or its ``points.jsonl``."""
    path = Path(path)
    points_file = path / _records.POINTS_FILE if path.is_dir() else path
    if not points_file.is_file():
        raise MoesweepError(f"no {_records.POINTS_FILE} in {path}: give a sweep's results directory "
                            "(results/<sweep_id>) or its points.jsonl")
    return _result_from_records(_records.read_points(str(points_file)), points_file.parent)


def _result_from_records(recs: list, directory: Path | None) -> SweepResult:
    latest: dict = {}
    restores = []
    for rec in recs:
        if rec.get("kind") == "restore":
            restores.append(RestoreResult.from_record(rec))
        elif rec.get("kind") == "point":
            latest[(rec.get("host"), rec.get("point"))] = rec
    sweep_id = next((r.get("sweep_id") for r in recs if r.get("sweep_id")), None)
    return SweepResult(sweep_id=sweep_id, directory=directory,
                       points=[PointResult.from_record(r) for r in latest.values()], restores=restores)


# ------------------------------------------------------------------------------------------------ events


@dataclass
class Event:
    """Progress of a run, in order: ``plan`` (the sweep's points), ``point_started``, ``phase`` (the point
    entered one of ``PHASES``, as the module of a task tells it: ``detail`` has the task and its module),
    ``level_started`` (a benchmark level began: ``detail`` has its concurrency and number of prompts), ``level`` (a
    benchmark level finished: ``detail`` has its concurrency, ``ok`` and ``figures``; both arrive while the
    benchmark runs), ``stage`` (the model's download, at every poll of its staging job and
    once when it finished: ``detail`` has ``bytes_done``, ``bytes_total``, ``rate_bytes_s``, ``eta_s``, ``msg``
    (one line, e.g. "lukealonso/GLM-5-NVFP4: 120.3 of 453.0 GB, 210.0 MB/s, about 26 min left") and ``finished``;
    the last one also ``downloaded``), ``point_finished`` (with its record), ``skipped`` (resumed: the point passed
    before; or not started because it runs the kernels of a point measured in this sweep: its record's ``same_as``
    names that point), ``restore``, ``failed`` (a task failed), ``done``."""

    kind: str
    host: str | None = None
    point: str | None = None
    phase: str | None = None
    record: dict | None = None
    detail: dict = field(default_factory=dict)
    at: float = field(default_factory=time.time)


# A point's phases, in the order a point enters them (docs/api.md).
PHASES = ("preflight", "resume", "configure", "restart", "readiness", "smoke", "accuracy", "benchmark", "record",
          "restore")

READY = "moesweep.sweep.sglang_ready"
RESTART = "moesweep.sweep.sglang_restart"
RECORD = "moesweep.sweep.sweep_record"
NODES = "moesweep.sweep.sglang_nodes"

# A phase comes from the module a task runs, never from the task's name (free text for its reader). ansible-runner's
# event of a task names its module (``resolved_action``, ``task_action``) but not its arguments, unless
# display_args_to_stdout prints them in every task's banner. So a module whose every call in a point begins the same
# phases tells them when its task starts; a module that serves several steps (sweep_record's states, a node group's
# barriers) tells them by its call's result (phases_of). Ansible starts a task whose condition is false too, then
# skips it: a stage that is off (smoke, accuracy) is told at its start all the same.
START_PHASES = {
    "moesweep.sweep.sglang_preflight": ("preflight",),
    "moesweep.sweep.sglang_unit": ("configure",),
    # one host's restart in one call: stop, release wait and start, then the wait for that run
    RESTART: ("restart", "readiness"),
    # the judge of the running server, a node group's wait for its ranks (their start, sglang_start, is the restart's)
    READY: ("readiness",),
    "moesweep.sweep.sglang_smoke": ("smoke",),
    "moesweep.sweep.sglang_accuracy": ("accuracy",),
}


def action_of(data: dict) -> str:
    """The module of a runner event's task: ``resolved_action``, the fully qualified name its action resolved to (a
    short or redirected name reads as the module's), else ``task_action``, the action as written."""
    return data.get("resolved_action") or data.get("task_action") or ""


def phases_of(action: str, result: dict | None = None) -> tuple[str, ...]:
    """The phases a task of module ``action`` begins, in order: when it starts (``result`` None), or those its
    result tells once it returned. The benchmark is told with its first level (level_events)."""
    if result is None:
        return START_PHASES.get(action, ())
    if action == RECORD:
        event = result.get("moesweep_event")
        if event == "resume":
            return ("resume",)
        if event == "record" and (result.get("moesweep_record") or {}).get("kind") == "point":
            return ("record",)
        if "choice" in result:  # state restore_plan: the configuration the host is left on
            return ("restore",)
    elif action == NODES and result.get("restart"):
        return ("restart",)  # a node group's decision (check restart): every rank stops, is released and starts
    return ()


def phase_events(host, state: dict, phases, detail: dict) -> list[Event]:
    """Events for the phases a task began in the host's current point, none repeating the phase told last."""
    if host not in state:
        return []
    point = state[host]
    out = []
    for phase in phases:
        if state.get(("phase", host, point)) != phase:
            state[("phase", host, point)] = phase
            out.append(Event("phase", host=host, point=point, phase=phase, detail=dict(detail)))
    return out


BENCH_WAIT = "moesweep.sweep.sglang_bench_wait"  # follows the async benchmark job (roles/sglang_bench)


def level_events(host, state: dict, res: dict, task: str | None = None) -> list[Event]:
    """The benchmark levels that started or ended since the last poll of the job, each once, in order. A poll's
    ``progress`` (module_utils bench_progress) carries every level's state; the job's final result its levels'
    full entries (figures, telemetry, diagnosis), for the levels no poll saw end."""
    point = state.get(host)
    told = state.setdefault(("levels", host, point), set())  # (concurrency, "started" / "ended")
    out = []
    final = {lv.get("concurrency"): lv for lv in res.get("levels") or []} if res.get("finished") else {}
    for entry in ((res.get("progress") or {}).get("levels") or []) or list(final.values()):
        c, st = entry.get("concurrency"), entry.get("state")
        if st in ("reused", "pending") or c is None:
            continue  # it did not run now: passed before, or never began (stopped or cancelled before it)
        if not told:  # the point's first level that runs: its benchmark began (a cancelled job never gets here)
            out += phase_events(host, state, ("benchmark",), {"task": task, "action": BENCH_WAIT})
        if st in ("running", "done", "failed") and (c, "started") not in told:
            told.add((c, "started"))
            out.append(Event("level_started", host=host, point=point,
                             detail={"concurrency": c, "num_prompts": entry.get("num_prompts")}))
        if (st in ("done", "failed") or c in final) and (c, "ended") not in told:
            told.add((c, "ended"))
            out.append(Event("level", host=host, point=point, detail=final.get(c) or entry))
    return out


STAGE_WAIT = "moesweep.sweep.model_stage_wait"  # follows the async model staging job (playbooks/tasks/sweep_point.yml)

PROGRESS_KEYS = ("bytes_done", "bytes_total", "rate_bytes_s", "eta_s", "msg")


def stage_event(host, state: dict, res: dict) -> Event:
    """One poll of the model's staging job: where its download is; once finished, what was staged."""
    progress = res.get("progress") or {}
    detail = {k: progress.get(k) for k in PROGRESS_KEYS}
    detail["finished"] = bool(res.get("finished"))
    if detail["finished"]:
        size = res.get("bytes")
        detail.update(downloaded=bool(res.get("downloaded")), bytes_total=size if size is not None
                      else detail["bytes_total"])
        detail["bytes_done"] = detail["bytes_total"]
        detail["rate_bytes_s"] = detail["eta_s"] = None
        gb = "" if size is None else f" ({stage_progress.size_of(size)})"  # the unit that fits: a tiny model in MB
        how = "downloaded now" if detail["downloaded"] else "already on the host"
        detail["msg"] = f"{res.get('repo_id') or 'the model'}: staged{gb}, {how}"
    return Event("stage", host=host, point=state.get(host), detail=detail)


def events_from_runner(event: dict, state: dict) -> list[Event]:
    """Translate one ansible-runner event into moesweep events (``state`` carries the current point per host)."""
    kind = event.get("event")
    data = event.get("event_data") or {}
    host = data.get("host") or data.get("remote_addr")
    res = data.get("res") or {}
    action = action_of(data)
    told = {"task": data.get("task"), "action": action}  # a phase event's detail: the task (its name) and module
    out = []
    if kind == "runner_on_start":
        out += phase_events(host, state, phases_of(action), told)
    elif kind == "runner_on_ok":
        out += phase_events(host, state, phases_of(action, res), told)
        ev = res.get("moesweep_event")
        if "moesweep_sweep" in res and ev is None and res.get("ansible_facts", {}).get("moesweep_sweep"):
            out.append(Event("plan", host=host, detail=res["moesweep_sweep"]))
        elif ev == "point_started":
            state[host] = res.get("point")
            out.append(Event("point_started", host=host, point=res.get("point")))
        elif ev == "resume" and res.get("skip"):
            out.append(Event("skipped", host=host, point=res.get("point"), record=res.get("moesweep_record"),
                             detail={"msg": res.get("msg")}))
        elif ev == "record":
            rec = res.get("moesweep_record") or {}
            if rec.get("kind") == "restore":
                out.append(Event("restore", host=host, point=rec.get("point"), record=rec))
            else:
                out.append(Event("point_finished", host=host, point=rec.get("point"), record=rec))
                state.pop(host, None)
        elif action == BENCH_WAIT:
            out += level_events(host, state, res, data.get("task"))
        elif action == STAGE_WAIT:
            out.append(stage_event(host, state, res))
    elif kind == "runner_retry" and action == BENCH_WAIT:
        out += level_events(host, state, res, data.get("task"))
    elif kind == "runner_retry" and action == STAGE_WAIT:
        out.append(stage_event(host, state, res))
    elif kind == "runner_on_failed" and not data.get("ignore_errors"):
        detail = {"task": data.get("task"), "msg": res.get("msg")}
        if "moesweep_unrecorded" in res:
            detail["unrecorded"] = list(res.get("moesweep_unrecorded") or []) or [res.get("msg")]
        out.append(Event("failed", host=host, point=state.get(host), detail=detail))
    elif kind in ("verbose", "error") and "ERROR" in (event.get("stdout") or ""):
        # ansible's own errors outside any task: no host matched, a syntax error, an undefined variable
        text = " ".join((event.get("stdout") or "").split())
        out.append(Event("failed", detail={"task": None, "msg": text.replace("[ERROR]: ", "")}))
    elif kind == "runner_on_unreachable":
        out.append(Event("failed", host=host, point=state.get(host), detail={"task": data.get("task"),
                                                                             "msg": res.get("msg"),
                                                                             "unreachable": True}))
    return out


# ------------------------------------------------------------------------------------------------ running


def _ansible_playbook_present() -> None:
    import sys

    bindir = os.path.dirname(sys.executable)
    if not (shutil.which("ansible-playbook") or os.path.exists(os.path.join(bindir, "ansible-playbook"))):
        raise MoesweepError("ansible-playbook is not installed in this environment: install the controller "
                            "requirements (make venv, or pip install -r requirements-controller.txt)")


def _check_inventory(inventory) -> str | None:
    if inventory is None:
        return None
    path = Path(inventory)
    if not path.exists():
        raise MoesweepError(f"inventory {inventory} does not exist: give the path of your inventory file "
                            "(e.g. inventory/example-proxmox.yml copied to inventory/mine.yml)")
    return str(path.resolve())


@dataclass
class Run:
    status: str
    rc: int
    seconds: float
    runner_dir: str
    canceled: bool


def run_playbook(playbook: str, *, inventory=None, extravars: dict | None = None, limit: str | None = None,
                 extra_vars_files: list | None = None, vault_password_file: str | None = None,
                 on_event: Callable[[dict], None] | None = None, cancel: Callable[[], bool] | None = None,
                 keep_runner_dir: bool = False, ident: str | None = None, verbosity: int = 0,
                 check: bool = False) -> Run:
    """Run one of the collection's playbooks with ansible-runner. Secrets stay out of every artifact: extra
    variables with secret names travel in a 0600 vars file inside the 0700 private data dir (never on a
    command line), and the runner's own ``command`` / ``env`` artifacts are removed with the directory.
    ``check`` runs it as ``ansible-playbook --check``."""
    import ansible_runner

    _ansible_playbook_present()
    inv = _check_inventory(inventory)
    pdd = tempfile.mkdtemp(prefix="moesweep-runner-")
    os.chmod(pdd, 0o700)
    extravars = dict(extravars or {})
    secret_vars = {k: v for k, v in extravars.items() if secrets.is_secret_name(k)}
    public_vars = {k: v for k, v in extravars.items() if k not in secret_vars}
    cmdline = []
    if inv:
        cmdline += ["-i", inv]
    if check:
        cmdline += ["--check"]
    if secret_vars:
        path = os.path.join(pdd, "secret-vars.json")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(secret_vars, fh)
        cmdline += ["-e", "@" + path]
    for f in extra_vars_files or []:
        if not Path(f).is_file():
            raise MoesweepError(f"extra vars file {f} does not exist")
        cmdline += ["-e", "@" + str(Path(f).resolve())]
    if vault_password_file:
        if not Path(vault_password_file).is_file():
            raise MoesweepError(f"vault password file {vault_password_file} does not exist")
        cmdline += ["--vault-password-file", str(Path(vault_password_file).resolve())]
    envvars = {"ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "ANSIBLE_DEPRECATION_WARNINGS": "False",
               "ANSIBLE_NOCOLOR": "1"}
    import sys

    bindir = os.path.dirname(sys.executable)
    if os.path.exists(os.path.join(bindir, "ansible-playbook")):
        path = os.environ.get("PATH", "")
        if not path.startswith(bindir + os.pathsep):
            os.environ["PATH"] = bindir + os.pathsep + path

    def handler(event):
        if on_event:
            on_event(event)
        return True  # ansible-runner drops events unless the handler returns True

    t0 = time.monotonic()
    try:
        r = ansible_runner.run(
            private_data_dir=pdd, project_dir=str(REPO_ROOT), playbook=str(REPO_ROOT / playbook),
            extravars=public_vars, limit=limit, ident=ident, envvars=envvars, cmdline=" ".join(
                _quote(c) for c in cmdline) or None, event_handler=handler,
            cancel_callback=(lambda: bool(cancel())) if cancel else None, quiet=True, suppress_env_files=True,
            verbosity=verbosity or None)
        return Run(status=r.status, rc=r.rc, seconds=time.monotonic() - t0, runner_dir=pdd,
                   canceled=r.status == "canceled")
    finally:
        if not keep_runner_dir:
            shutil.rmtree(pdd, ignore_errors=True)


def _quote(word: str) -> str:
    import shlex

    return shlex.quote(str(word))


def load_matrix(matrix) -> dict:
    """A launch matrix from a dict (the matrix itself, or a vars file's ``{matrix: ...}``) or the path of the vars
    file ``sweep.yml -e @FILE`` takes, its structure checked by the one validator (plugin_utils/matrix.py; its flags
    and values are checked against the host's sglang version when the sweep plans), or MoesweepError."""
    try:
        if isinstance(matrix, (str, os.PathLike)):
            path = Path(matrix)
            if not path.is_file():
                raise MoesweepError(f"matrix file {path}: no such file; give a YAML file with a top-level 'matrix' key")
            matrix = _matrix.load_matrix_file(path.read_text(encoding="utf-8"), source=str(path))
        elif isinstance(matrix, dict) and set(matrix) == {"matrix"}:
            matrix = matrix["matrix"]
        _matrix.expand(matrix)  # its structure and its size (max_cells), before anything runs
    except _matrix.MatrixError as exc:
        raise MoesweepError(f"the matrix: {exc}") from exc
    return matrix


def iter_sweep(inventory, backends=None, *, matrix=None, results_dir: str | os.PathLike = "results",
               sweep_id: str | None = None,
               resume: bool = True, rerun: bool = False, measure_equivalent: bool = False,
               limit: str | None = None, restore: str = "best",
               extra_vars_files: list | None = None, vault_password_file: str | None = None,
               stop_after_step: Callable[[], bool] | None = None, cancel: Callable[[], bool] | None = None,
               **variables) -> Iterator[Event]:
    """Run a sweep and yield its events as they happen; the last event is ``done`` with the SweepResult in
    ``detail['result']``. ``stop_after_step()`` returning True asks the sweep to stop after the current step
    (the point is recorded ``interrupted`` and the host restored); ``cancel()`` stops at once. ``matrix``: a launch
    matrix instead of ``backends`` (``load_matrix``), each cell a point."""
    if matrix is not None:
        if backends:
            raise MoesweepError("give either backends or a matrix, not both: a matrix's cells are its points (add "
                                "moe-runner-backend as one of its axes)")
        matrix = load_matrix(matrix)
    if isinstance(backends, str):
        backends = [b for b in backends.split(",") if b]
    if matrix is None and backends != "compatible" and not backends:
        raise MoesweepError("no backends: give at least one, e.g. ['flashinfer_cutlass'], or a matrix")
    results_dir = Path(results_dir).resolve()
    if results_dir.exists() and not results_dir.is_dir():
        raise MoesweepError(f"results directory {results_dir} is a file: give a directory")
    if sweep_id and not resume and (results_dir / sweep_id).exists():
        raise MoesweepError(f"sweep {sweep_id} already exists in {results_dir}: choose another sweep_id, or "
                            "resume it (resume=True / moesweep sweep --resume)")
    extravars = {"results_dir": str(results_dir), "restore": restore, "rerun": rerun,
                 "measure_equivalent": measure_equivalent, **variables}
    if matrix is not None:
        extravars["matrix"] = matrix
    else:
        extravars["backends"] = backends
    if sweep_id:
        extravars["sweep_id"] = sweep_id
    q: queue.Queue = queue.Queue()
    state: dict = {}
    plan: dict = {}
    stop_file: list = []

    ran: dict = {"points": {}, "restores": [], "unrecorded": []}

    def on_event(ev):
        for e in events_from_runner(ev, state):
            if e.kind in ("point_finished", "skipped") and e.record:
                ran["points"][(e.host, e.point)] = PointResult.from_record(e.record)
            elif e.kind == "restore" and e.record:
                ran["restores"].append(RestoreResult.from_record(e.record))
            elif e.kind == "failed" and e.detail.get("unrecorded"):
                ran["unrecorded"] += e.detail["unrecorded"]
            if e.kind == "plan":
                plan.update(e.detail)
                stop_file[:] = [Path(e.detail["dir"]) / _records.STOP_FILE]
            q.put(e)

    def want_cancel():
        if stop_after_step and stop_after_step() and stop_file:
            stop_file[0].parent.mkdir(parents=True, exist_ok=True)
            stop_file[0].touch()
        return bool(cancel and cancel())

    box: dict = {}

    def work():
        try:
            box["run"] = run_playbook(SWEEP_PLAYBOOK, inventory=inventory, extravars=extravars, limit=limit,
                                      extra_vars_files=extra_vars_files, vault_password_file=vault_password_file,
                                      on_event=on_event, cancel=want_cancel)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc
        finally:
            q.put(None)

    thread = threading.Thread(target=work, name="moesweep-sweep", daemon=True)
    thread.start()
    while True:
        try:
            e = q.get(timeout=STOP_POLL_S)
        except queue.Empty:
            want_cancel()  # a stop asked between events reaches the stop file now, not at the runner's next poll
            continue
        if e is None:
            break
        want_cancel()
        yield e
    thread.join()
    if "error" in box:
        raise box["error"]
    run = box["run"]
    kept = _records.kept_records(plan["sweep_id"]) if plan.get("sweep_id") else []
    if plan.get("dir") and (Path(plan["dir"], _records.POINTS_FILE).is_file() or kept):
        # the records kept aside (they could not be written) are the sweep's too
        result = _result_from_records(_records.all_records(str(Path(plan["dir"], _records.POINTS_FILE)),
                                                           plan["sweep_id"]), Path(plan["dir"]))
    else:
        result = SweepResult(sweep_id=plan.get("sweep_id"), directory=Path(plan["dir"]) if plan.get("dir") else None,
                             points=[], restores=[])
    if stop_file and stop_file[0].exists():
        stop_file[0].unlink()
        result.interrupted = True
    result.rc, result.status = run.rc, run.status
    result.interrupted = result.interrupted or run.canceled
    result.run_points, result.run_restores = list(ran["points"].values()), ran["restores"]
    result.unrecorded = ran["unrecorded"]
    yield Event("done", detail={"result": result, "rc": run.rc, "status": run.status})


def sweep(inventory, backends=None, **kwargs) -> SweepResult:
    """Run a sweep and return its typed result (see iter_sweep for the arguments; ``matrix=`` sweeps a launch
    matrix)."""
    result = None
    for event in iter_sweep(inventory, backends, **kwargs):
        if event.kind == "done":
            result = event.detail["result"]
    return result


def provision(inventory, *, limit: str | None = None, **variables) -> Run:
    """Run site.yml: the pinned CUDA toolkit and SGLang stack on the hosts."""
    return run_playbook(SITE_PLAYBOOK, inventory=inventory, limit=limit, extravars=variables)


def _collect(playbook, inventory, limit, variables, action):
    found: dict = {}

    def on_event(ev):
        data = ev.get("event_data") or {}
        if ev.get("event") in ("runner_on_ok", "runner_on_failed") and action_of(data) == action:
            found[data.get("host")] = data.get("res") or {}

    run = run_playbook(playbook, inventory=inventory, limit=limit, extravars=variables, on_event=on_event)
    return run, found


def gather_facts(inventory, *, limit: str | None = None) -> dict:
    """Host -> GPU facts (``moesweep.sweep.gpu_facts``)."""
    run, found = _collect(FACTS_PLAYBOOK, inventory, limit, {}, "moesweep.sweep.gpu_facts")
    if not found:
        raise MoesweepError(f"no host answered (ansible rc {run.rc}): check the inventory's gpu_hosts group")
    return {h: (r.get("ansible_facts") or {}).get("moesweep_gpu") or r for h, r in found.items()}


def check(inventory, backend: str, *, limit: str | None = None, **variables) -> dict:
    """Host -> the preflight's verdict for ``backend`` on that host (nothing on the host changes)."""
    run, found = _collect(CHECK_PLAYBOOK, inventory, limit, {"backend": backend, **variables},
                          "moesweep.sweep.sglang_preflight")
    if not found:
        raise MoesweepError(f"no host answered (ansible rc {run.rc}): check the inventory's gpu_hosts group")
    return found


# The signals a sweep is stopped with: Ctrl-C, what `timeout`, systemd and CI cancels send, a closed terminal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def interrupt_safe(fn):
    """Run ``fn(stop_after_step, cancel)``: a first stop signal (Ctrl-C, SIGTERM, SIGHUP) asks the sweep to stop
    after the current step (the point recorded ``interrupted``, the host restored), a second one cancels at once
    (ansible-runner ends ansible-playbook; nothing outlives this process). Used by the CLI. Without the handlers a
    SIGTERM would end this process at once and leave ansible-playbook, in its own session, running without it."""
    presses = {"n": 0}

    def handler(signum, frame):
        presses["n"] += 1

    old = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        return fn(lambda: presses["n"] >= 1, lambda: presses["n"] >= 2)
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)
