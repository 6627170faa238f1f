"""Multi-node serving of the simulated server (--nnodes 2 --node-rank 0/1 --dist-init-addr), two processes on
127.0.0.1 standing for two hosts: node 0 waits for node 1 at the dist-init address, node 1 runs its schedulers
and then only the dummy health server of launch_dummy_health_check_server (sglang/srt/utils/common.py)."""

from __future__ import annotations

import signal
import time

import pytest
from simulator.test_server import BASE, Sim, free_port

ARGS = BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--nnodes", "2"]


@pytest.fixture
def pair(tmp_path):
    made = []

    def make(rank: int, dist_port: int, version="0.5.9", env=None, extra=()):
        d = tmp_path / f"node{rank}"
        d.mkdir(exist_ok=True)
        s = Sim(d, ARGS + ["--node-rank", str(rank), "--dist-init-addr", f"127.0.0.1:{dist_port}", *extra],
                version=version, env=env)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


def _wait_log(s, text, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if text in s.log():
            return
        if s.proc.poll() is not None:
            raise AssertionError(f"exited {s.proc.returncode}\n{s.log()[-2000:]}")
        time.sleep(0.1)
    raise AssertionError(f"no {text!r} in\n{s.log()[-2000:]}")


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_two_nodes_serve_and_node1_answers_only_health(pair, version):
    dist = free_port()
    n0 = pair(0, dist, version, extra=["--enable-metrics"])
    n1 = pair(1, dist, version, extra=["--enable-metrics"])
    n0.wait_ready()
    _wait_log(n1, "Dummy health check server started in background thread at 127.0.0.1:")
    for path in ("/ping", "/health", "/health_generate"):
        t0 = time.monotonic()
        st, body, r = n1.req("GET", path)
        assert (st, body) == (200, b"") and time.monotonic() - t0 < 0.5  # no generation behind it
        assert r.getheader("content-type") is None
    assert n1.req("GET", "/model_info")[0] == 404 and n1.req("POST", "/generate", {"text": "x"})[0] == 404
    assert n1.req("POST", "/health")[0] == 405
    # node 1's schedulers are not attn_tp_rank 0, so nothing there writes metrics: /metrics is empty
    assert n1.req("GET", "/metrics")[:2] == (200, b"") and b"sglang:num_running_reqs{" in n0.req("GET", "/metrics")[1]
    assert n0.req("POST", "/generate", {"text": "a b", "sampling_params": {"max_new_tokens": 2}})[0] == 200
    log0, log1 = n0.log(), n1.log()
    begin = "Init torch distributed begin." if version == "0.5.9" else "Init parallel begin."
    assert all(f"TP{r}] {begin}" in log0 for r in range(4)) and "TP4]" not in log0
    assert all(f"TP{r}] {begin}" in log1 for r in range(4, 8)) and "TP3]" not in log1
    assert "max_total_num_tokens=" in log0 and "max_total_num_tokens=" not in log1
    assert "Uvicorn running" in log0 and "Uvicorn running" not in log1  # uvicorn at log level warning
    assert n1.access() == ""  # and no access log
    assert "server_args=" in log1


def test_missing_node_hangs_at_distributed_init(pair):
    dist = free_port()
    n0 = pair(0, dist)
    _wait_log(n0, "TP3] Init torch distributed begin.")
    time.sleep(2.0)
    assert n0.proc.poll() is None
    assert n0.log().rstrip().endswith("TP3] Init torch distributed begin.")  # nothing after it
    with pytest.raises(OSError):
        n0.req("GET", "/health", timeout=2)
    n1 = pair(1, dist)  # the missing node arrives: both go on
    n0.wait_ready()
    _wait_log(n1, "Dummy health check server started")


def test_node1_without_node0_hangs_too(pair):
    n1 = pair(1, free_port())
    _wait_log(n1, "TP7] Init torch distributed begin.")
    time.sleep(2.0)
    assert n1.proc.poll() is None and n1.log().rstrip().endswith("TP7] Init torch distributed begin.")


def test_losing_a_node_stalls_node0(pair):
    dist = free_port()
    n0 = pair(0, dist, env={"SGLANG_HEALTH_CHECK_TIMEOUT": "2"})
    n1 = pair(1, dist)
    n0.wait_ready()
    _wait_log(n1, "Dummy health check server started")
    n1.proc.kill()
    n1.proc.wait(10)
    time.sleep(0.3)
    assert n0.req("GET", "/health", timeout=10)[0] == 503  # the next collective never completes
    assert "Health check failed. Server couldn't get a response from detokenizer for last 2 seconds." in n0.log()


def test_0523_shutdown_reaches_every_node(pair):
    dist = free_port()
    n0 = pair(0, dist, "0.5.23", env={"MOESWEEP_SIM_TIME_SCALE": "0.1"})
    n1 = pair(1, dist, "0.5.23")
    n0.wait_ready()
    _wait_log(n1, "Dummy health check server started")
    n1.proc.send_signal(signal.SIGTERM)
    _wait_log(n1, "SIGTERM received on node_rank 1; waiting for the rank-0 ShutdownReq broadcast to stop the "
                  "schedulers.")
    assert n1.proc.poll() is None
    n0.proc.send_signal(signal.SIGTERM)
    assert n0.wait_exit() == 0 and n1.wait_exit() == 0
