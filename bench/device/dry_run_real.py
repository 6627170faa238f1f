#!/usr/bin/env python3
"""The dry run of sglang's own argument handling (plugins/module_utils/sglang_dryrun.py) on a real GPU host: the
program run by the real server venv's interpreter (real sglang, torch and GPU, no stubs, the GPU answers torch's),
as the ``sglang_dry_run`` module runs it, on launch lines that sglang refuses at its arguments and at the schedulers'
start, and one it accepts; each timed from the interpreter's start to the answer.

Goal (issue #45): a refusal in <= 15 s on a real host (what it saves: the server's start, minutes).

On the device, after bench/device/real_sglang/device_run.py staged the 0.5.15 stack into /opt/moesweep/venvs/sglang:

    python3 bench/device/dry_run_real.py --python /opt/moesweep/venvs/sglang/bin/python --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "plugins" / "module_utils"))

import sglang_dryrun  # noqa: E402  (stdlib only: the program and its request / answer)

MODEL = REPO / "bench" / "device" / "real_sglang" / "models" / "qwen3-moe-tiny-bf16"
COMMON = ["--model-path", str(MODEL), "--load-format", "dummy", "--attention-backend", "triton",
          "--sampling-backend", "pytorch"]
CASES = {
    "accepted (tp 1, triton)": COMMON + ["--tp", "1", "--moe-runner-backend", "triton"],
    "refused at the schedulers' GPUs (tp 2 on one GPU)": COMMON + ["--tp", "2", "--moe-runner-backend", "triton"],
    "refused at ServerArgs (flashinfer_cutlass with --quantization fp8)":
        COMMON + ["--tp", "1", "--moe-runner-backend", "flashinfer_cutlass", "--quantization", "fp8"],
}


def run(python: str, argv: list[str], timeout: float) -> dict:
    req = sglang_dryrun.request(argv, environment={"HF_HUB_OFFLINE": "1"}, gpus_fallback=True)
    started = time.monotonic()
    proc = subprocess.run([python, "-I", "-c", sglang_dryrun.program_source()], input=json.dumps(req),
                          capture_output=True, text=True, timeout=timeout)
    wall = time.monotonic() - started
    answer = sglang_dryrun.parse_output(proc.stdout) or {"verdict": "none", "stderr": proc.stderr[-3000:]}
    answer["wall_s"] = round(wall, 2)
    answer.pop("resolved", None)
    return answer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", required=True, help="the server venv's interpreter")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--runs", type=int, default=2, help="runs per case (the first pays the cold imports)")
    ap.add_argument("--timeout", type=float, default=120.0)
    a = ap.parse_args()
    results = {}
    for name, argv in CASES.items():
        results[name] = [run(a.python, argv, a.timeout) for _ in range(a.runs)]
        for i, ans in enumerate(results[name]):
            err = ans.get("error") or {}
            print(f"{name}, run {i + 1}: {ans['verdict']} {ans.get('stage') or ''} in {ans['wall_s']} s "
                  f"(gpus: {ans.get('gpus')}) {err.get('type') or ''} {(err.get('message') or '')[:160]!r}",
                  flush=True)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "dry_run_real.json").write_text(json.dumps(results, indent=1, default=str))
    refusals = [ans["wall_s"] for name, runs in results.items() if name.startswith("refused") for ans in runs
                if ans["verdict"] == "refused"]
    print(f"worst refusal: {max(refusals) if refusals else 'none refused'} s (goal 15 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
