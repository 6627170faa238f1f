#!/usr/bin/env python3
"""Compare, per cell, what the real server did on the device with what moesweep said about the same launch line
(dev machine, no GPU):

- the preflight's verdict for SM90 and sglang 0.5.15 (``plan_cells.plan_cell``: the knowledge base as it is now);
- the simulator's verdict for the same argv (``simulator/bin/sglang-sim`` given the cell's own flags and an H100
  profile, followed by the same ``readiness.Waiter`` as on the device);
- the classifier's verdict on the whole real log, read again offline (``sglang_log.classify_lines``), against the
  live verdict the device run recorded;
- the readiness latency on real timestamps (the verdict's wall time less the stamp of the line that decides it).

    .venv/bin/python bench/device/real_sglang/compare.py RESULTS_DIR     # writes RESULTS_DIR/comparison.{md,json}
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, "collections"))
sys.path.insert(0, HERE)

import plan_cells  # noqa: E402
from ansible_collections.moesweep.sweep.plugins.module_utils import sglang_log  # noqa: E402

SIM = os.path.join(REPO, "simulator", "bin", "sglang-sim")


def real_lines(path):
    """The device log's lines without the driver's '<epoch> ' stamp."""
    out = []
    for line in open(path, encoding="utf-8", errors="replace"):
        stamp, _, text = line.rstrip("\n").partition(" ")
        out.append(text)
    return out


def simulate(cell, sim_version="0.5.15"):
    """The simulator's verdict for the cell's own flags on a simulated H100 (the program swapped for sglang-sim)."""
    import device_run as dr

    work = tempfile.mkdtemp(prefix="real-sglang-sim-")
    profile = os.path.join(work, "profile.json")
    with open(profile, "w") as fh:
        json.dump({"simulated": True, "gpu_model": "h200", "gpu_count": 1, "sglang_version": sim_version}, fh)
    argv = [sys.executable, SIM] + list(cell["argv"][3:])
    argv[argv.index("--model-path") + 1] = os.path.join(REPO, argv[argv.index("--model-path") + 1])
    port = 31000 + (abs(hash((cell["model"], cell["backend"]))) % 2000)
    argv[argv.index("--port") + 1] = str(port)
    env = dict(cell["environment"], HOME=work, MOESWEEP_SIM_PROFILE=profile,
               MOESWEEP_SIM_STATE=os.path.join(work, "state.json"),
               MOESWEEP_SIM_FAULT_FILE=os.path.join(work, "nofault"), MOESWEEP_SIM_TIME_SCALE="0.05")
    sim_cell = dict(cell, argv=argv, environment=env, port=port, bench=False, ready_timeout=60.0)
    dr.log = lambda msg: None
    dr.REPO = REPO
    out = dr.run_cell(sim_cell, os.path.join(work, "cell"), time.time() + 90, {})
    r = out["readiness"]
    return {"state": r["state"], "cause": r.get("cause"), "phase": r.get("phase"),
            "decisive_line": (r.get("decisive_line") or "")[:300]}


def sim_version(cell, version="0.5.15"):
    """The version the simulator emulates for the cell, None where it has none (it would fall back to another)."""
    sys.path.insert(0, os.path.join(REPO, "simulator"))
    from moesweep_sim import sglang_server

    return version if version in sglang_server.SUPPORTED else None


def verdict_mark(agrees):
    return {None: " (no claim)", True: "", False: " **differs**"}[agrees]


def main():
    results = sys.argv[1]
    run = json.load(open(os.path.join(results, "run.json")))
    rows = []
    for cell in run["cells"]:
        if "readiness" not in cell:
            rows.append({"model": cell["model"], "backend": cell["backend"],
                         "real": cell.get("not_run") or "driver error"})
            continue
        name = "{}__{}".format(cell["model"], cell["backend"])
        live = cell["readiness"]
        offline = sglang_log.classify_lines(real_lines(os.path.join(results, "cells", name, "server.log")))
        planned = plan_cells.plan_cell(cell["model"], cell["backend"])
        sim = simulate(planned)
        row = {
            "model": cell["model"], "backend": cell["backend"],
            "real": live["state"], "real_cause": live.get("cause"), "real_phase": live.get("phase"),
            "real_line": (live.get("decisive_line") or "")[:300], "real_elapsed_s": live.get("elapsed"),
            "offline": offline["state"], "offline_cause": offline.get("cause"), "offline_phase": offline.get("phase"),
            "preflight": planned["verdict"],
            "preflight_rules": [r.get("rule") for r in planned.get("reasons") or []],
            "sim": sim["state"], "sim_cause": sim["cause"], "sim_line": sim["decisive_line"],
            "latency_after_fired_up_s": cell.get("latency_after_fired_up_s"),
            "latency_after_traceback_s": cell.get("latency_after_traceback_s"),
        }
        real_runs = live["state"] == "ready"
        # A timeout here is the run's own cut-off (its readiness timeout, set by the device budget), not the
        # server's verdict: the real outcome is unknown, the log only says how far the start had come.
        row["cut_off"] = live["state"] == "timeout"
        # "unknown" claims nothing; the simulator emulates only the versions it has the wheels' text of.
        row["preflight_agrees"] = None if planned["verdict"] == "unknown" or row["cut_off"] else (
            (planned["verdict"] in ("supported", "warn") and real_runs)
            or (planned["verdict"] == "unsupported" and not real_runs))
        row["sim_version"] = sim_version(planned)
        row["sim_agrees"] = None if row["cut_off"] or not row["sim_version"] else (
            (sim["state"] == live["state"]) and (sim["cause"] == live.get("cause")))
        row["classifier_agrees"] = (offline["state"] == "starting" if row["cut_off"] else
                                    offline["state"] == live["state"] and offline.get("cause") == live.get("cause"))
        rows.append(row)
    with open(os.path.join(results, "comparison.json"), "w") as fh:
        json.dump(rows, fh, indent=1, sort_keys=True)
        fh.write("\n")
    head = ("| model | backend | real (outcome, phase reached) | classifier offline | preflight | simulator "
            "| latency s |\n|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        if "offline" not in r:
            lines.append("| {} | {} | {} | | | | |".format(r["model"], r["backend"], r["real"]))
            continue
        lat = r["latency_after_fired_up_s"] if r["real"] == "ready" else r["latency_after_traceback_s"]
        real = ("cut off at {:.0f} s, still starting".format(r["real_elapsed_s"]) if r["cut_off"]
                else "{} ({}".format(r["real"], r["real_cause"] or "-"))
        sim = ("not emulated (sglang 0.5.15)" if not r["sim_version"]
               else "{} ({}){}".format(r["sim"], r["sim_cause"] or "-", verdict_mark(r["sim_agrees"])))
        lines.append("| {} | {} | {}, {}) | {}{} | {}{} | {} | {} |".format(
            r["model"], r["backend"], real if not r["cut_off"] else "(" + real, r["real_phase"] or "-",
            r["offline"], verdict_mark(r["classifier_agrees"]),
            r["preflight"], verdict_mark(r["preflight_agrees"]).replace("differs", "wrong"),
            sim, "-" if lat is None else f"{lat:.3f}"))
    with open(os.path.join(results, "comparison.md"), "w") as fh:
        fh.write(head + "\n".join(lines) + "\n")
    print(head + "\n".join(lines))


if __name__ == "__main__":
    main()
