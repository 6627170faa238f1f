#!/usr/bin/env python3
"""Does moesweep's benchmark measure what an independent client measures? NVIDIA's aiperf and the
sglang_bench module (sglang 0.5.9's bench_serving through the module, as a sweep point runs it) against the
same simulated SGLang server, at one concurrency level with the same fixed lengths and request count; both
next to the simulator's ground truth (its token model). Goal: the two output throughputs within 3 % of each
other.

    .venv/bin/python bench/aiperf_agreement.py [--concurrency 8] [--input-len 32] [--output-len 128]
                                               [--requests 32] [--backend sglang-oai] [--json]

Everything runs on 127.0.0.1: the simulated server is a local process (no simulated host is booted). aiperf
is installed by this script into ~/.cache/moesweep/venvs/aiperf-<version> (pinned below; about 5 min and
1.2 GB the first time); the bench client venv is the one tests/integration/test_bench_serving_sim.py builds.

aiperf and a local tokenizer directory: with HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE set, aiperf 0.13.0
takes ``--tokenizer`` for a hub repo id and fails (HFValidationError from snapshot_download with
local_files_only); without them it sees a directory and loads it with no hub call. So aiperf runs without
the offline variables and with HF_ENDPOINT on a closed loopback port, so a stray hub call fails at once.

Both clients hit the server with closed-loop concurrency (a new request as soon as one finishes), streaming,
``ignore_eos``; aiperf on ``/v1/completions`` (``--endpoint-type completions``), the module on its
``--backend`` (default ``sglang-oai``, the same route). aiperf's synthetic prompts come from its own text
corpus, which the simulator's WordLevel vocabulary mostly lacks, so they decode to ``<unk>`` words: still
``--input-len`` whitespace words, which is what the simulator counts as prompt tokens. aiperf counts output
tokens with the same tokenizer (one generated word = one token).

Exit status: 0 goal met, 1 goal missed, 2 a run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from moesweep.sim import local_server  # noqa: E402

AIPERF_VERSION = "0.13.0"
AIPERF_VENV = local_server.VENVS / f"aiperf-{AIPERF_VERSION}"
GOAL_PCT = 3.0
# low enough that the simulator and both clients stay far from CPU bound on a loaded 2-core machine
DEFAULT_RATES = (30.0, 0.05, 5000.0)


def aiperf_python() -> Path:
    return local_server.build_venv(AIPERF_VENV, [[f"aiperf=={AIPERF_VERSION}"]])


def aiperf_env() -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")}
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"  # nothing listens there: any hub call fails fast, on loopback
    return env


def served_model(url: str) -> str:
    with urllib.request.urlopen(url + "/v1/models", timeout=10) as r:
        return json.load(r)["data"][0]["id"]


def run_aiperf(py: Path, server: local_server.SimServer, model: str, a, artifacts: Path) -> dict:
    argv = [str(py), "-m", "aiperf", "profile", "--model", model, "--url", server.url,
            "--endpoint-type", "completions", "--streaming", "--tokenizer", str(local_server.TOKENIZER),
            "--synthetic-input-tokens-mean", str(a.input_len), "--synthetic-input-tokens-stddev", "0",
            "--output-tokens-mean", str(a.output_len), "--output-tokens-stddev", "0",
            "--extra-inputs", "ignore_eos:true", "--request-count", str(a.requests),
            "--concurrency", str(a.concurrency), "--warmup-request-count", "1", "--random-seed", "1",
            "--no-gpu-telemetry", "--no-server-metrics", "--ui-type", "none", "--artifact-dir", str(artifacts)]
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, env=aiperf_env(), timeout=900)
    wall = time.monotonic() - t0
    (artifacts / "console.log").parent.mkdir(parents=True, exist_ok=True)
    (artifacts / "console.log").write_text(r.stdout + r.stderr)
    export = artifacts / "profile_export_aiperf.json"
    if r.returncode != 0 or not export.is_file():
        return {"ok": False, "error": f"aiperf exited {r.returncode}: {(r.stdout + r.stderr)[-1500:]}"}
    doc = json.loads(export.read_text())

    def avg(key):
        return (doc.get(key) or {}).get("avg")

    completed = avg("request_count")
    errors = doc.get("error_summary") or []
    return {"ok": completed == a.requests and not errors, "output_throughput": avg("output_token_throughput"),
            "duration": avg("benchmark_duration"), "completed": completed, "errors": errors,
            "output_sequence_length": avg("output_sequence_length"), "wall_s": round(wall, 1),
            "version": doc.get("aiperf_version"), "artifacts": str(artifacts)}


def run_sglang_bench(client: Path, server: local_server.SimServer, model: str, a, out: Path) -> dict:
    args = local_server.module_args(server, client, out / "levels", model=model, backend=a.backend,
                                    input_len=a.input_len, output_len=a.output_len, concurrency=[a.concurrency],
                                    num_prompts=[a.requests])
    rc, res, wall = local_server.run_module(args, out, env=server.smi_env)
    levels = res.get("levels") or []
    if rc != 0 or not levels:
        return {"ok": False, "error": f"sglang_bench rc {rc}: {res.get('msg')}"}
    lv = levels[0]
    return {"ok": bool(lv.get("ok")), "output_throughput": lv["figures"].get("output_throughput"),
            "duration": lv["figures"].get("duration"), "completed": lv.get("completed"),
            "errors": lv.get("errors"), "wall_s": round(wall, 1), "state": res.get("state"),
            "verdict": (lv.get("diagnosis") or {}).get("verdict")}


def pct(x: float, ref: float) -> float:
    return 100.0 * (x / ref - 1.0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--input-len", type=int, default=32)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--requests", type=int, default=32, help="requests per client (a multiple of the concurrency "
                   "keeps every wave full)")
    p.add_argument("--backend", default="sglang-oai", choices=["sglang-oai", "sglang", "vllm"],
                   help="the module's bench_serving backend (aiperf always uses /v1/completions)")
    p.add_argument("--gpu-model", default="rtx-pro-6000", choices=["rtx-pro-6000", "h200"])
    p.add_argument("--rates", type=float, nargs=3, metavar=("DECODE", "ALPHA", "PREFILL"), default=DEFAULT_RATES,
                   help="the simulator's token rates: decode tok/s per request at batch 1, its slow-down per extra "
                   "request, prefill tok/s")
    p.add_argument("--client-python", type=Path, help="an existing bench client venv's python (default: the cached "
                   "venv, built on first use)")
    p.add_argument("--keep", type=Path, help="keep the artifacts (aiperf's exports, the module's level files) here")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    a = p.parse_args()
    if a.concurrency <= 0 or a.input_len <= 0 or a.output_len <= 0 or a.requests < a.concurrency:
        p.error("concurrency, --input-len and --output-len must be > 0 and --requests >= --concurrency")

    try:
        client, aip = a.client_python or local_server.bench_client_python(), aiperf_python()
    except local_server.VenvError as exc:
        print(f"aiperf_agreement: {exc}", file=sys.stderr)
        return 2
    work = a.keep or Path(tempfile.mkdtemp(prefix="moesweep-aiperf-"))
    with local_server.SimServer(work / "server", gpu_model=a.gpu_model, rates=tuple(a.rates)) as srv:
        model = served_model(srv.url)
        expected = srv.expected(a.concurrency, a.input_len, a.output_len)
        aiperf = run_aiperf(aip, srv, model, a, work / "aiperf")
        ours = run_sglang_bench(client, srv, model, a, work / "sglang_bench")
    base, alpha, prefill = srv.params()
    report = {"concurrency": a.concurrency, "input_len": a.input_len, "output_len": a.output_len,
              "requests": a.requests, "gpu_model": a.gpu_model, "rates": {"decode": base, "alpha": alpha,
                                                                         "prefill": prefill},
              "expected_output_throughput": round(expected, 2), "aiperf": aiperf, "sglang_bench": ours,
              "module_backend": a.backend, "goal_pct": GOAL_PCT, "artifacts": str(work)}
    failed = [name for name, r in (("aiperf", aiperf), ("sglang_bench", ours)) if not r.get("ok")]
    if not failed:
        report["difference_pct"] = round(pct(ours["output_throughput"], aiperf["output_throughput"]), 2)
        report["goal_met"] = abs(report["difference_pct"]) <= GOAL_PCT
    if a.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"concurrency {a.concurrency}, {a.input_len} in / {a.output_len} out tokens, {a.requests} requests "
              f"per client; simulated {a.gpu_model}, decode {base:g} tok/s per request at batch 1, alpha {alpha:g}, "
              f"prefill {prefill:g} tok/s")
        print(f"  {'expected (token model)':<34} {expected:9.2f} tok/s")
        for label, r in ((f"aiperf {AIPERF_VERSION} (/v1/completions)", aiperf),
                         (f"sglang_bench ({a.backend})", ours)):
            if not r.get("ok"):
                print(f"  {label:<34} FAILED: {r.get('error') or r.get('errors')}")
                continue
            print(f"  {label:<34} {r['output_throughput']:9.2f} tok/s  {pct(r['output_throughput'], expected):+6.2f} % "
                  f"from expected; {r['completed']:.0f}/{a.requests} ok, duration {r['duration']:.2f} s, "
                  f"wall {r['wall_s']:.1f} s")
        if not failed:
            print(f"  {'sglang_bench vs aiperf':<34} {report['difference_pct']:+9.2f} %      goal |difference| <= "
                  f"{GOAL_PCT:g} %: {'met' if report['goal_met'] else 'NOT met'}")
    if failed:
        return 2
    return 0 if report["goal_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
