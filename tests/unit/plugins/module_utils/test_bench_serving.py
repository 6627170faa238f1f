"""bench_serving (sglang 0.5.9) as moesweep drives it: the level plan and its refusals, the exact command, and
the parser on the client's real output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from ansible_collections.moesweep.sweep.plugins.module_utils import bench_serving as bs
from helpers.paths import FIXTURES

FIX = FIXTURES / "bench_serving"


def test_levels_scale_prompts_with_concurrency():
    assert bs.plan_levels([1, 8, 32, 64]) == [(1, 16), (8, 40), (32, 160), (64, 320)]
    assert bs.plan_levels([2, 4], 10) == [(2, 10), (4, 10)]
    assert bs.plan_levels([2, 4], [8, 12]) == [(2, 8), (4, 12)]


@pytest.mark.parametrize("args,needle", [
    (([],), "non-empty list"),
    (([0, 8],), "positive integers"),
    (([-1],), "positive integers"),
    (([8, 8],), "twice"),
    (([8, 64], 32), "num_prompts 32 is smaller than the concurrency 64"),
    (([8], [4, 5]), "2 entries for 1 concurrency levels"),
])
def test_bad_levels_name_the_fix(args, needle):
    with pytest.raises(bs.BenchInputError) as exc:
        bs.plan_levels(*args)
    assert needle in str(exc.value)


@pytest.mark.parametrize("lengths,needle", [((0, 1024, 1.0), "input_len"), ((1024, 0, 1.0), "output_len"),
                                            ((8, 8, 1.5), "range_ratio")])
def test_bad_lengths(lengths, needle):
    with pytest.raises(bs.BenchInputError, match=needle):
        bs.check_lengths(*lengths)


def test_level_command_is_the_real_cli():
    argv = bs.level_argv("/v/bin/python", "http://127.0.0.1:8000", "glm-5", "/tok", 8, 40, "/o/c8.jsonl")
    assert argv[:3] == ["/v/bin/python", "-m", "sglang.bench_serving"]
    for pair in (["--dataset-name", "random-ids"], ["--random-range-ratio", "1.0"], ["--max-concurrency", "8"],
                 ["--num-prompts", "40"], ["--request-rate", "inf"], ["--tokenizer", "/tok"]):
        i = argv.index(pair[0])
        assert argv[i:i + 2] == pair
    assert "--output-details" in argv and "--disable-tqdm" in argv


def test_level_arguments_parse_with_the_real_client_parser():
    """Every option moesweep passes exists in the real bench_serving 0.5.9 parser (read from the wheel)."""
    import ast

    from simulator.real_wheels import source

    src = source("sglang==0.5.9", "sglang/bench_serving.py")
    options = {n.args[0].value for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Call)
               and getattr(n.func, "attr", "") == "add_argument" and n.args and isinstance(n.args[0], ast.Constant)}
    argv = bs.level_argv("py", "http://h:1", "m", "/t", 1, 16, "/o", dataset_path="/d")
    assert {a for a in argv if a.startswith("--")} <= options


def test_the_real_client_takes_the_api_key_from_its_environment_only():
    """sglang_bench gives the key as OPENAI_API_KEY: the real bench_serving 0.5.9 sends it as a Bearer token
    (get_auth_headers) and has no option that takes it, so it need never be on the client's command line."""
    import ast

    from simulator.real_wheels import source

    src = source("sglang==0.5.9", "sglang/bench_serving.py")
    tree = ast.parse(src)
    auth = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "get_auth_headers")
    assert 'os.environ.get("OPENAI_API_KEY")' in ast.get_source_segment(src, auth)
    options = {n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call)
               and getattr(n.func, "attr", "") == "add_argument" and n.args and isinstance(n.args[0], ast.Constant)}
    assert not {o for o in options if "api-key" in o or "auth" in o}, options


def test_parse_real_result_line():
    record = bs.last_json_line((FIX / "sglang-0.5.9-sim-c4.jsonl").read_text())
    level = bs.parse_result(record, 20)
    assert level["ok"] and level["completed"] == 20 and level["failed"] == 0 and level["errors"] == []
    f = level["figures"]
    assert f["output_throughput"] == pytest.approx(103.84, abs=0.01) and f["duration"] == pytest.approx(12.33, abs=0.01)
    assert f["total_output_tokens"] == 1280 and "p99_ttft_ms" in f and "median_itl_ms" in f
    assert level["args"]["max_concurrency"] == 4 and level["args"]["random_range_ratio"] == 1.0
    trimmed = bs.trim_record(record)
    assert "itls" not in trimmed and "generated_texts" not in trimmed and trimmed["errors_summary"] == []
    json.dumps(trimmed)


def test_a_level_with_failed_requests_is_not_ok():
    record = bs.last_json_line((FIX / "sglang-0.5.9-sim-c4.jsonl").read_text())
    record = dict(record, completed=18, errors=[""] * 18 + ["ClientConnectorError: Connect call failed"] * 2)
    level = bs.parse_result(record, 20)
    assert not level["ok"] and level["failed"] == 2
    assert level["errors"] == [{"error": "ClientConnectorError: Connect call failed", "count": 2}]


def test_a_run_without_result_line_reports_why():
    log = (FIX / "sglang-0.5.9-server-gone.log").read_text()
    errors = bs.stdout_errors(log)
    assert any("Connection refused" in e for e in errors), errors
    assert bs.last_json_line(log) is None


def test_torn_last_line_is_ignored():
    text = (FIX / "sglang-0.5.9-sim-c4.jsonl").read_text()
    assert bs.last_json_line(text + '{"duration": 1.0, "comp') is not None


def test_tokenizer_resolution(tmp_path):
    hub = tmp_path / "hf" / "hub" / "models--lukealonso--GLM-5-NVFP4"
    (hub / "snapshots" / "abc123").mkdir(parents=True)
    (hub / "snapshots" / "0old").mkdir(parents=True)
    (hub / "refs").mkdir()
    (hub / "refs" / "main").write_text("abc123\n")
    from os import listdir
    from os.path import isdir

    def read(p):
        with open(p) as fh:
            return fh.read()

    path, how = bs.resolve_tokenizer("", "lukealonso/GLM-5-NVFP4", str(tmp_path / "hf"), isdir, listdir, read)
    assert path.endswith("/snapshots/abc123") and "refs/main" in how
    assert bs.resolve_tokenizer("/nope", "", "", isdir, listdir, read)[0] is None
    path, how = bs.resolve_tokenizer("", "org/missing", str(tmp_path / "hf"), isdir, listdir, read)
    assert path is None and "not in the Hugging Face cache" in how
    assert bs.resolve_tokenizer("", str(tmp_path), "", isdir, listdir, read)[0] == str(tmp_path)


def _stand_in_client(tmp_path, source):
    """A package ``sglang`` under tmp_path whose bench_serving module is ``source`` (PYTHONPATH=tmp_path)."""
    pkg = tmp_path / "sglang"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "bench_serving.py").write_text(source)


def test_driver_source_is_valid_python_and_runs_levels(tmp_path):
    """The driver with a stand-in module: one event per level start and end, a failing level does not stop
    the next one."""
    _stand_in_client(tmp_path,
        "import sys\nif __name__ == '__main__':\n    print('args', sys.argv[1:])\n"
        "    if '--fail' in sys.argv: raise RuntimeError('boom')\n")
    plan = {"levels": [{"concurrency": 1, "args": ["--x"], "log": str(tmp_path / "c1.log")},
                       {"concurrency": 2, "args": ["--fail"], "log": str(tmp_path / "c2.log")},
                       {"concurrency": 4, "args": ["--y"], "log": str(tmp_path / "c4.log")}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    out = subprocess.run([sys.executable, "-c", bs.DRIVER_SOURCE, str(tmp_path / "plan.json")], cwd=tmp_path,
                         capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path)}, check=True).stdout
    events = bs.parse_events(out)
    assert [(e["event"], e.get("concurrency"), e.get("rc")) for e in events[1:]] == [
        ("start", 1, None), ("end", 1, 0), ("start", 2, None), ("end", 2, 1), ("start", 4, None), ("end", 4, 0),
        ("done", None, None)]
    assert "RuntimeError: boom" in events[4]["error"] and "args ['--y']" in (tmp_path / "c4.log").read_text()


def test_a_driver_started_ahead_imports_then_waits_for_the_go_and_reads_its_plan_only_then(tmp_path):
    """--wait: the imports happen at once, the plan is read after a line on stdin (it may not exist before), and
    a closed stdin without the go ends the driver without running anything."""
    _stand_in_client(tmp_path, "import sys\nif __name__ == '__main__':\n    print('ran', sys.argv[1:])\n")
    plan_path = tmp_path / "plan.json"
    argv = [sys.executable, "-c", bs.DRIVER_SOURCE, str(plan_path), "--wait"]
    env = {"PYTHONPATH": str(tmp_path)}
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert json.loads(proc.stdout.readline())["event"] == "imported"  # before any plan exists
    plan_path.write_text(json.dumps({"levels": [{"concurrency": 2, "args": ["--z"], "log": str(tmp_path / "c2.log")}]}))
    out, _ = proc.communicate("go\n", timeout=60)
    assert [e["event"] for e in bs.parse_events(out)] == ["start", "end", "done"]
    assert "ran ['--z']" in (tmp_path / "c2.log").read_text()
    (tmp_path / "c2.log").unlink()
    gone = subprocess.run(argv, cwd=tmp_path, env=env, input="", capture_output=True, text=True, timeout=60)
    assert gone.returncode == 0 and [e["event"] for e in bs.parse_events(gone.stdout)] == ["imported"]
    assert not (tmp_path / "c2.log").exists()


def test_overhead_per_level():
    assert bs.overhead_per_level(23.0, [10.0, 10.0]) == 1.5
    assert bs.overhead_per_level(5.0, []) is None


def test_the_driver_stamps_the_start_of_the_main_run(tmp_path):
    """The line bench_serving prints after its warmup (before its fixed 1 s sleep) becomes a "main" event."""
    _stand_in_client(tmp_path,
        "if __name__ == '__main__':\n    print('Starting warmup with 1 sequences...')\n"
        "    print('Warmup completed with 1 sequences. Starting main benchmark run...')\n    print('done')\n")
    plan = {"levels": [{"concurrency": 4, "args": [], "log": str(tmp_path / "c4.log")}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    out = subprocess.run([sys.executable, "-c", bs.DRIVER_SOURCE, str(tmp_path / "plan.json")], cwd=tmp_path,
                         capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path)}, check=True).stdout
    events = bs.parse_events(out)
    assert [(e["event"], e.get("concurrency")) for e in events[1:]] == [
        ("start", 4), ("main", 4), ("end", 4), ("done", None)]
    assert events[1]["t"] <= events[2]["t"] <= events[3]["t"]
    assert "Starting main benchmark run" in (tmp_path / "c4.log").read_text()


def test_level_window():
    # stamped: the fixed 1 s sleep after the main-run line, then the duration (never past the level's end)
    assert bs.level_window(100.0, 110.0, 5.0, 99.0) == (101.0, 106.0)
    assert bs.level_window(100.0, 103.0, 5.0, 99.0) == (101.0, 103.0)
    # not stamped (another client version): the duration that ended with the level
    assert bs.level_window(None, 110.0, 5.0, 99.0) == (105.0, 110.0)
    # no duration (the level failed): the level's own start and end
    assert bs.level_window(None, 110.0, None, 99.0) == (99.0, 110.0)


def test_a_sized_level_asks_after_each_round_and_runs_what_it_is_told(tmp_path):
    """A level planned ``sized``: after each round a "round" event and one line on stdin; {"more": N} runs N more
    requests without warmup and with the next seed, {"more": 0} ends the level."""
    _stand_in_client(tmp_path, "import sys\nif __name__ == '__main__':\n    print('args', ' '.join(sys.argv[1:]))\n")
    args = ["--num-prompts", "8", "--warmup-requests", "1", "--seed", "42", "--output-file", "c4.jsonl"]
    plan = {"levels": [{"concurrency": 4, "args": args, "log": str(tmp_path / "c4.log"), "sized": True},
                       {"concurrency": 8, "args": args, "log": str(tmp_path / "c8.log")}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    out = subprocess.run([sys.executable, "-c", bs.DRIVER_SOURCE, str(tmp_path / "plan.json")], cwd=tmp_path,
                         input='{"more": 12}\n{"more": 0}\n', capture_output=True, text=True,
                         env={"PYTHONPATH": str(tmp_path)}, check=True, timeout=60).stdout
    events = bs.parse_events(out)
    assert [(e["event"], e.get("concurrency"), e.get("round")) for e in events[1:]] == [
        ("start", 4, None), ("round", 4, 1), ("round", 4, 2), ("end", 4, None), ("start", 8, None), ("end", 8, None),
        ("done", None, None)]
    assert events[4]["rounds"] == 2 and events[6]["rounds"] == 1
    log = [line for line in (tmp_path / "c4.log").read_text().splitlines() if line.startswith("args")]
    assert log == ["args --num-prompts 8 --warmup-requests 1 --seed 42 --output-file c4.jsonl",
                   "args --num-prompts 12 --warmup-requests 0 --seed 43 --output-file c4.jsonl"]


def test_json_lines_and_round_ok():
    text = '{"completed": 2, "ttfts": [0.1, 0.2], "errors": ["", ""]}\nnoise\n{"completed": 1, "ttfts": [0.1, 0.0], ' \
           '"errors": ["", "Bad Request"]}\n'
    rounds = bs.json_lines(text)
    assert len(rounds) == 2 and bs.round_ok(rounds[0]) and not bs.round_ok(rounds[1])


def test_the_server_info_of_a_result_never_keeps_the_api_key():
    """bench_serving writes /get_server_info (the server's ServerArgs, api_key included) into its result line: the
    level's kept result and the raw output on the host are redacted (re-probe #37 item 2)."""
    key = "my-plain-server-key-42"  # no credential-looking shape: only its name and its value give it away
    line = {"completed": 8, "output_throughput": 10.0, "server_info": {"api_key": key, "admin_api_key": key,
                                                                        "tp_size": 8, "moe_runner_backend": "triton"},
            "note": f"curl -H 'Authorization: Bearer {key}'"}
    kept = bs.trim_record(line, known=[key])
    assert key not in json.dumps(kept)
    assert kept["server_info"]["api_key"] == "<redacted>" and kept["server_info"]["tp_size"] == 8
    assert kept["output_throughput"] == 10.0
    raw = json.dumps(line) + f"\nTraceback: key was {key}\n"
    scrubbed = bs.redact_lines(raw, known=[key])
    assert key not in scrubbed and json.loads(scrubbed.splitlines()[0])["completed"] == 8
    # without the key's value, its name alone is enough
    assert key not in json.dumps(bs.trim_record({"server_info": {"api_key": key}}))
