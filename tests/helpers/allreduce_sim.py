"""An all-reduce measurement record as a sweep on a simulated host writes it (interconnect.jsonl): the simulator's
stand-in for the measuring program, read by the module's parser, recorded by the record builder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers.paths import REPO

GLM5 = {"layers": 78, "hidden_size": 6144, "model_type": "glm_moe_dsa"}


def simulated_table(tmp: Path, gpu_model: str = "rtx-pro-6000", ngpus: int = 8) -> dict:
    from ansible_collections.moesweep.sweep.plugins.module_utils import interconnect

    prof = tmp / f"profile-{gpu_model}.json"
    prof.write_text(json.dumps({"gpu_model": gpu_model, "gpu_count": ngpus}))
    env = {k: v for k, v in os.environ.items() if k != "MOESWEEP_SIM_INTERCONNECT"}
    env.update(MOESWEEP_SIM_PROFILE=str(prof), MOESWEEP_SIM_TIME_SCALE="0")
    out = subprocess.run([sys.executable, str(REPO / "simulator" / "bin" / "allreduce-perf-sim"), "--ngpus",
                          str(ngpus)], capture_output=True, text=True, env=env, check=True, timeout=60).stdout
    return interconnect.parse_all_reduce_perf(out)


def write_measurement(sweep_dir: Path, host: str, tmp: Path, gpu_model: str = "rtx-pro-6000",
                      environment: dict | None = None) -> dict:
    """Append the simulated measurement of ``host`` to ``sweep_dir``/interconnect.jsonl; returns the record."""
    from ansible_collections.moesweep.sweep.plugins.module_utils import interconnect
    from ansible_collections.moesweep.sweep.plugins.plugin_utils import records

    table = simulated_table(tmp, gpu_model)
    env = interconnect.nccl_environment(environment or {"NCCL_P2P_LEVEL": "PHB", "NCCL_IB_DISABLE": "1"})
    rec = records.build_interconnect_record({"sweep_id": sweep_dir.name, "host": host, "simulated": True,
                                             "measurement": dict(table, nccl_environment=env,
                                                                 key=interconnect.environment_key(env, table["ranks"]),
                                                                 environment_text=interconnect.environment_text(env),
                                                                 model=dict(GLM5))})
    with open(sweep_dir / records.INTERCONNECT_FILE, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    return rec
