"""The sglang_bench module end to end against the simulated SGLang server (a local process on 127.0.0.1, no
simulated host): run as Ansible runs it, with the real sglang 0.5.9 bench_serving in the client venv and
telemetry from the simulated nvidia-smi.

* at every concurrency level, on the native backend (``sglang``: ``/generate``) and an OpenAI one
  (``sglang-oai``: ``/v1/completions``), every level is ok and its output throughput is within 3 % of the
  simulator's ground truth (tokenmodel.expected_output_throughput at the rates the server runs at);
* on the simulated 8x RTX PRO 6000 the telemetry shows ~100 % utilization at ~55 % of the 600 W limit with
  the SM clock at its maximum, and the diagnosis says launch bound; on the simulated H200 under load (power
  bound: ~690 of 700 W, SW power cap) it does not.

The token rate is kept low (at most 8 streams x ~22 tok/s) so the simulator and the client stay far from CPU
bound on a loaded 2-core machine; levels are two full waves of requests (num_prompts = 2 x concurrency), long
enough for the sampler (4 Hz) and the boards' 1.25 s power ramp.
"""

from __future__ import annotations

import concurrent.futures
import time

import pytest

from moesweep.sim import local_server

# alone: its throughput is held to 3 % of the simulator's ground truth, which a test in another worker would slow.
pytestmark = [pytest.mark.slow, pytest.mark.alone]

RATES = (30.0, 0.05, 5000.0)  # decode tok/s per request at batch 1, alpha, prefill tok/s
INPUT_LEN, OUTPUT_LEN = 32, 128
LEVELS = [2, 4, 8]
TOLERANCE = 0.03


@pytest.fixture(scope="module")
def client_python():
    try:
        return local_server.bench_client_python()
    except local_server.VenvError as exc:
        pytest.skip(f"cannot build the bench client venv: {exc}")


@pytest.fixture(scope="module")
def rtx_server(tmp_path_factory):
    with local_server.SimServer(tmp_path_factory.mktemp("rtx"), gpu_model="rtx-pro-6000", rates=RATES) as srv:
        yield srv


def bench(server, client, tmp_path, backend, levels):
    args = local_server.module_args(server, client, tmp_path / "out", backend=backend, input_len=INPUT_LEN,
                                    output_len=OUTPUT_LEN, concurrency=levels, num_prompts=[2 * c for c in levels])
    rc, res, wall = local_server.run_module(args, tmp_path, env=server.smi_env)
    assert rc == 0 and res.get("state") == "ok", res.get("msg")
    assert [lv["concurrency"] for lv in res["levels"]] == levels
    assert res["sampler"]["kind"] == "nvidia-smi"  # no NVML in the client venv: the fallback sampler
    return res, wall


@pytest.mark.parametrize("backend", ["sglang", "sglang-oai"])
def test_throughput_matches_ground_truth_and_rtx_is_launch_bound(client_python, rtx_server, tmp_path, backend):
    res, wall = bench(rtx_server, client_python, tmp_path, backend, LEVELS)
    print(f"\n{backend}: module wall {wall:.1f} s, overhead {res['overhead_s_per_level']} s per level")
    for lv in res["levels"]:
        c, fig = lv["concurrency"], lv["figures"]
        assert lv["ok"] and not lv["reused"], lv["errors"]
        assert lv["completed"] == 2 * c and lv["failed"] == 0
        assert fig["total_output_tokens"] == 2 * c * OUTPUT_LEN
        expected = rtx_server.expected(c, INPUT_LEN, OUTPUT_LEN)
        measured = fig["output_throughput"]
        diag, tel = lv["diagnosis"], lv["diagnosis"]["figures"]
        print(f"  c{c}: {measured:.2f} tok/s, expected {expected:.2f} ({100 * (measured / expected - 1):+.2f} %); "
              f"util {tel['util_pct']:.1f} %, power {100 * tel['power_frac']:.1f} % of {tel['power_limit_w']:.0f} W, "
              f"SM {tel['sm_clock_mhz']:.0f}/{tel['sm_clock_max_mhz']:.0f} MHz -> {diag['verdict']}")
        assert abs(measured / expected - 1) <= TOLERANCE, (c, measured, expected)
        # the RTX PRO 6000 decode signature: busy all the time at about half the board power, clock at max
        assert lv["telemetry"]["gpu_count"] == 8
        assert tel["util_pct"] >= 90.0, tel
        assert 0.45 <= tel["power_frac"] <= 0.60, tel
        assert tel["power_limit_w"] == 600.0
        assert tel["sm_clock_frac"] >= 0.95, tel
        assert diag["verdict"] == "launch_bound" and not diag["invalid"], diag


def test_h200_under_load_is_not_launch_bound(client_python, tmp_path):
    with local_server.SimServer(tmp_path / "h200", gpu_model="h200", backend="flashinfer_cutlass", quantization=None,
                                rates=RATES) as srv:
        res, _wall = bench(srv, client_python, tmp_path, "sglang", [8])
        expected = srv.expected(8, INPUT_LEN, OUTPUT_LEN)
    lv = res["levels"][0]
    diag, tel = lv["diagnosis"], lv["diagnosis"]["figures"]
    print(f"\nh200 c8: {lv['figures']['output_throughput']:.2f} tok/s (expected {expected:.2f}); util "
          f"{tel['util_pct']:.1f} %, power {100 * tel['power_frac']:.1f} % of {tel['power_limit_w']:.0f} W, "
          f"SW power cap in {100 * (tel['sw_power_cap_share'] or 0):.0f} % of samples -> {diag['verdict']}")
    assert lv["ok"]
    assert abs(lv["figures"]["output_throughput"] / expected - 1) <= TOLERANCE
    assert tel["util_pct"] >= 90.0 and tel["power_limit_w"] == 700.0
    assert tel["power_frac"] > 0.60, tel  # far above the launch-bound ceiling (60 % of the limit)
    assert diag["verdict"] != "launch_bound", diag
    assert diag["verdict"] == "power_bound", diag


def test_a_gated_job_started_before_the_server_checks_it_once_released(client_python, tmp_path):
    """A sweep starts the job before the restart: it prepares while nothing listens on the port, sends nothing,
    and checks the server only once released (no server then: it says so and runs nothing)."""
    server = local_server.SimServer(tmp_path / "srv", rates=RATES)
    out = tmp_path / "out"
    args = local_server.module_args(server, client_python, out, input_len=INPUT_LEN, output_len=32, concurrency=[2],
                                    num_prompts=[4], gated=True, gate_timeout=300)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        job = pool.submit(local_server.run_module, args, tmp_path / "job", server.smi_env)
        time.sleep(4)  # the client's imports and the sampler's first sample happen now, with no server
        assert not job.done(), job.result()
        with server:
            (out / "go").write_text("")
            rc, res, _wall = job.result(timeout=300)
    assert rc == 0 and res["state"] == "ok", res.get("msg")
    assert res["gated_s"] >= 3.0 and res["levels"][0]["ok"] and res["levels"][0]["completed"] == 4
    assert res["model"]  # asked from /v1/models once released

    # released while nothing listens: the check after the gate names the problem, and no level ran
    args["output_dir"] = str(tmp_path / "out2")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        job = pool.submit(local_server.run_module, args, tmp_path / "job2", server.smi_env)
        time.sleep(2)
        (tmp_path / "out2").mkdir(exist_ok=True)
        (tmp_path / "out2" / "go").write_text("")
        rc, res, _wall = job.result(timeout=300)
    assert rc != 0 and f"nothing listens on 127.0.0.1:{server.port}" in res["msg"], res.get("msg")
