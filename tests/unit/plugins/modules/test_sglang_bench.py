"""sglang_bench refuses bad input before any request, each time naming the fix; the documentation matches the
argument spec."""

from __future__ import annotations

import socket
import sys

import pytest
from ansible_collections.moesweep.sweep.plugins.modules import sglang_bench


@pytest.fixture
def bench(run_module, tmp_path, monkeypatch):
    tok = tmp_path / "tok"
    tok.mkdir()
    site = tmp_path / "site"
    (site / "sglang").mkdir(parents=True)
    (site / "sglang" / "bench_serving.py").write_text("")

    def run_command(self, argv, **kw):
        if "sysconfig" in " ".join(argv):
            return 0, str(site) + "\n", ""
        return 1, "", ""

    monkeypatch.setattr(sglang_bench.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(sglang_bench.AnsibleModule, "get_bin_path", lambda self, name, required=False: None)

    def call(**args):
        base = {"client_python": sys.executable, "tokenizer": str(tok), "output_dir": str(tmp_path / "out"),
                "port": 1}
        base.update(args)
        return run_module(sglang_bench, base)

    return call


@pytest.mark.parametrize("args,needle", [
    ({"concurrency": []}, "non-empty list"),
    ({"concurrency": [0, 8]}, "positive integers"),
    ({"input_len": 0}, "input_len must be a positive number"),
    ({"output_len": 0}, "output_len must be a positive number"),
    ({"concurrency": [64], "num_prompts": [16]}, "num_prompts 16 is smaller than the concurrency 64"),
    ({"tokenizer": "/no/such/tokenizer"}, "tokenizer directory /no/such/tokenizer does not exist"),
    ({"client_python": "/no/such/python"}, "the benchmark client /no/such/python does not exist"),
    ({"diagnosis_thresholds": {"nope": 1}}, "diagnosis_thresholds"),
    ({"dataset_name": "sharegpt"}, "needs a local dataset_path"),
])
def test_bad_input_is_refused_before_any_request(bench, args, needle):
    kind, r = bench(**args)
    assert kind == "fail" and needle in r["msg"], r["msg"]
    assert r["levels"] == []


def test_a_client_venv_without_sglang(bench, monkeypatch, tmp_path):
    monkeypatch.setattr(sglang_bench.AnsibleModule, "run_command", lambda self, argv, **kw: (0, str(tmp_path), ""))
    kind, r = bench()
    assert kind == "fail" and "has no sglang" in r["msg"] and "site.yml" in r["msg"]


def test_nothing_listening_names_the_port_and_the_unit_state(bench):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    kind, r = bench(port=port)
    assert kind == "fail" and f"nothing listens on 127.0.0.1:{port}" in r["msg"]
    assert "sglang_ready" in r["msg"] and "Traceback" not in r["msg"]


def test_a_server_that_is_not_ready(bench):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Starting(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(503)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Starting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        kind, r = bench(port=server.server_address[1])
    finally:
        server.shutdown()
    assert kind == "fail" and "is not ready: /health answered 503" in r["msg"]


def test_documentation_matches_the_argument_spec():
    import re

    import yaml

    doc = yaml.safe_load(sglang_bench.DOCUMENTATION)
    spec = set(re.findall(r"^\s{12}(\w+)=dict\(", open(sglang_bench.__file__).read(), re.M))
    assert set(doc["options"]) == spec
    yaml.safe_load(sglang_bench.EXAMPLES)
    assert {"state", "levels", "overhead_s_per_level", "crash"} <= set(yaml.safe_load(sglang_bench.RETURN))


def test_the_telemetry_tail_ends_at_the_first_sample_after_the_last_response(tmp_path):
    """sample_after reads the CSV's last 4 KiB (of a real 8 KiB nvidia-smi recording from the H200 device, so the
    tail starts mid-line): a sample after the given time ends the wait at once; none waits the whole timeout."""
    from ansible_collections.moesweep.sweep.plugins.module_utils import telemetry
    from helpers.paths import REPO

    text = (REPO / "tests/fixtures/telemetry/h200-x1-20261201/smi-cudagraph.csv").read_text()
    assert len(text) > 4096
    path = tmp_path / "telemetry.csv"
    path.write_text(text)
    fields = telemetry.query_fields("580.159.04")
    last = max(r["t"] for r in telemetry.parse_samples(text, fields=fields) if r.get("t") is not None)
    import time

    t0 = time.monotonic()
    assert sglang_bench.sample_after(str(path), last - 0.001, 5.0, fields) is True
    assert time.monotonic() - t0 < 1.0
    t0 = time.monotonic()
    assert sglang_bench.sample_after(str(path), last + 60, 0.3, fields) is False
    assert time.monotonic() - t0 >= 0.3


def test_only_levels_that_passed_are_kept_for_a_resumed_run(tmp_path):
    import json

    for c, ok in ((1, True), (8, False), (32, True)):
        files = sglang_bench.level_files(str(tmp_path), c)
        open(files["summary"], "w").write(json.dumps({"concurrency": c, "ok": ok}))
        if c != 32:
            open(files["jsonl"], "w").write("{}\n")  # c32's output file is missing: incomplete
    open(sglang_bench.level_files(str(tmp_path), 64)["summary"], "w").write("{half")
    kept = sglang_bench.passed_levels(str(tmp_path), [(1, 16), (8, 40), (32, 160), (64, 320)])
    assert kept == {1: {"concurrency": 1, "ok": True, "reused": True}}


def test_a_bad_input_failure_leaves_the_output_dir_untouched(bench, tmp_path):
    kind, r = bench(concurrency=[])
    assert kind == "fail" and not (tmp_path / "out").exists()


def test_the_output_dir_and_what_an_earlier_run_left_are_private(tmp_path):
    """Files under /var/lib/moesweep/runs/ are 0600 in 0700 directories, readable by no other user (#37 item 2)."""
    import stat

    old = tmp_path / "runs" / "s1" / "triton" / "abc"
    old.mkdir(parents=True)
    (old / "c8.bench.jsonl").write_text("{}\n")
    (old / "c8.bench.jsonl").chmod(0o644)
    target = tmp_path / "runs" / "s1" / "triton" / "abc"
    sglang_bench.private_dir(str(target))
    sglang_bench.private_dir(str(tmp_path / "fresh" / "a" / "b"))
    assert stat.S_IMODE((target / "c8.bench.jsonl").stat().st_mode) == 0o600
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    for d in (tmp_path / "fresh", tmp_path / "fresh" / "a", tmp_path / "fresh" / "a" / "b"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


def test_a_level_that_ended_is_kept_though_its_job_never_ended(tmp_path):
    """#37: a killed controller, the next run's job stops this one before its end: the levels that finished are
    kept (their summary is written as each ends), not measured again."""
    import json

    parsed = {"ok": True, "figures": {"output_throughput": 210.5}, "completed": 40, "failed": 0, "errors": []}
    files = sglang_bench.level_files(str(tmp_path), 8)
    open(files["jsonl"], "w").write("{}\n")
    open(files["summary"], "w").write(json.dumps(sglang_bench.level_at_end(8, 40, parsed)))
    kept = sglang_bench.passed_levels(str(tmp_path), [(8, 40), (64, 320)])
    assert kept[8]["figures"]["output_throughput"] == 210.5 and kept[8]["provisional"] and kept[8]["reused"]
    assert 64 not in kept
    assert sglang_bench.level_at_end(8, 40, parsed, error="timed out")["ok"] is False


def test_the_api_key_reaches_the_client_in_its_environment_never_its_command_line(bench, monkeypatch):
    """bench_serving reads the key from OPENAI_API_KEY (sglang v0.5.9 python/sglang/bench_serving.py:124-127,
    get_auth_headers; tests/unit/plugins/module_utils/test_bench_serving.py reads it from the wheel): the client's
    argv, which every user of the host can read in /proc/PID/cmdline, never holds it."""
    started = []

    class Driver:
        stdin = stdout = None

        def __init__(self, argv, env=None, **_kw):
            started.append((list(argv), dict(env or {})))

        def poll(self):
            return None

        def kill(self):
            pass

        def wait(self, timeout=None):
            return -9

    monkeypatch.setattr(sglang_bench.subprocess, "Popen", Driver)
    kind, r = bench(api_key="sk-bench-unit-key")
    assert kind == "fail"  # nothing listens on port 1; the client was started before that was known
    assert started, r["msg"]
    for argv, env in started:
        assert not any("sk-bench-unit-key" in word for word in argv), argv
        assert env.get("OPENAI_API_KEY") == "sk-bench-unit-key"
    assert "sk-bench-unit-key" not in repr(r)
