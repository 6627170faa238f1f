"""`make demo`: the main job on the embedded default, a SIMULATED 8x RTX PRO 6000 Blackwell (SM120, PCIe) host.

1. `moesweep sim up --hosts 1` boots the simulated host (inventory/sim.yml, the default inventory);
2. `playbooks/site.yml` provisions it, as a real VM is provisioned, from a wheelhouse served on the host's
   gateway (the host reaches no registry, like an air-gapped VM): the CUDA 12.8 toolkit it finds, the test
   stack (the real sglang 0.5.9 and flashinfer 0.6.3 wheels, CPU torch; the simulator stands in for the
   server's GPU work) and the benchmark client venv with sglang 0.5.9's own bench_serving;
3. `moesweep sweep` runs the 4-backend sweep of the GLM-5-NVFP4 bring-up: flashinfer_trtllm is refused by the
   preflight (SM100-only kernels), the others are started, smoke-checked, benchmarked with telemetry and
   diagnosed, and the host is left on the fastest;
4. `moesweep report` writes the comparison report (Markdown, HTML, plots).

Every command is printed before it runs, so it can be run by hand. Exit status: 0 when the sweep ran (a refused
point is a result, not a failure), else the failing step's status.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO / "src"))

from moesweep.sim import hosts as simhosts  # noqa: E402
from moesweep.sim import wheelhouse  # noqa: E402

STACK = "test-cpu-sglang-0.5.9"
LOCKS = REPO / "roles" / "sglang_env" / "files" / "locks"
BACKENDS = "flashinfer_trtllm,flashinfer_cutedsl,flashinfer_cutlass,triton"
SWEEP_ID = "demo-rtx-pro-6000-sm120"
# The simulated server's launch runs at a quarter of its recorded timings, and the benchmark is short (three
# levels, 128-token answers): the whole sweep takes a few minutes on 2 cores. Real runs keep the defaults.
SETTINGS = {
    "sglang_server_extra_environment": {"MOESWEEP_SIM_TIME_SCALE": "0.25"},
    "sglang_bench_concurrency": [1, 4, 16],
    "sglang_bench_prompts_per_concurrency": 2,
    "sglang_bench_min_prompts": 8,
    "sglang_bench_input_len": 128,
    "sglang_bench_output_len": 128,
}


def run(argv: list[str], **kw) -> int:
    print("+ " + " ".join(shlex.quote(str(a)) for a in argv), flush=True)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), PATH=f"{BIN}:{os.environ.get('PATH', '')}")
    return subprocess.run([str(a) for a in argv], cwd=REPO, env=env, **kw).returncode


def main() -> int:
    up = simhosts.up(n=1)
    host = up.hosts[0]
    print(f"simulated host {host.name} at {host.address} (SIMULATED 8x RTX PRO 6000 Blackwell, SM120), "
          f"inventory {up.inventory}", flush=True)
    root = wheelhouse.build([LOCKS / f"{STACK}.txt", LOCKS / "client-sglang-0.5.9.txt"])
    with wheelhouse.serve(root, host.gateway, 0) as url:
        extra = {"sglang_env_stack": STACK, "sglang_env_index_url": f"{url}/simple/",
                 "sglang_env_trusted_hosts": [host.gateway]}
        rc = run([BIN / "ansible-playbook", "-i", up.inventory, "site.yml", "-e", json.dumps(extra)])
    if rc != 0:
        print(f"demo: provisioning failed (exit {rc}); the output above says why", file=sys.stderr)
        return rc
    with tempfile.TemporaryDirectory(prefix="moesweep-demo-") as tmp:
        settings = Path(tmp) / "demo-settings.json"
        settings.write_text(json.dumps(SETTINGS))
        rc = run([BIN / "moesweep", "sweep", "-i", up.inventory, "--backends", BACKENDS, "--results", "results",
                  "--sweep-id", SWEEP_ID, "--rerun", "-e", f"@{settings}"])
    if rc not in (0, 1):  # 1: some points did not pass (flashinfer_trtllm is refused on SM120): they are results
        print(f"demo: the sweep did not complete (exit {rc})", file=sys.stderr)
        return rc
    rc = run([BIN / "moesweep", "report", f"results/{SWEEP_ID}"])
    if rc == 0:
        with contextlib.suppress(OSError):
            print(f"\nreport: {REPO / 'results' / SWEEP_ID / 'report' / 'report.html'} "
                  f"(and report.md); records: {REPO / 'results' / SWEEP_ID / 'points.jsonl'}")
        print("the simulated host keeps serving the best point; `make demo-down` powers it off")
    return rc


if __name__ == "__main__":
    sys.exit(main())
