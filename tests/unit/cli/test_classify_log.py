"""``moesweep classify-log``: JSON shape, human output and exit codes on the real-log corpus."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers.paths import FIXTURES as FIXTURES_ROOT
from helpers.paths import REPO

from moesweep.cli import main

FIXTURES = FIXTURES_ROOT / "sglang-logs"


@pytest.mark.parametrize(
    "name,state,code",
    [
        ("crash_warmup_502.log", "crashed", 1),
        ("hang_capture_registering.log", "starting", 2),
        ("ready_serving_hicache.log", "ready", 0),
    ],
)
def test_json_and_exit_code(capsys, name, state, code):
    rc = main(["classify-log", str(FIXTURES / name), "--json"])
    out = capsys.readouterr().out
    obj = json.loads(out)
    assert rc == code
    assert obj["state"] == state
    assert set(obj) >= {"state", "cause", "phase", "after_ready", "decisive_line", "timeline"}
    assert out.count("\n") == 1  # one JSON object, one line


def test_crash_json_fields(capsys):
    main(["classify-log", str(FIXTURES / "oom_graph_capture_deepep.log"), "--json"])
    obj = json.loads(capsys.readouterr().out)
    assert obj["cause"] == "oom"
    assert obj["phase"] == "cuda_graph"
    assert obj["after_ready"] is False
    assert "Capture cuda graph failed: CUDA out of memory" in obj["decisive_line"]


def test_human_output(capsys):
    rc = main(["classify-log", str(FIXTURES / "crash_warmup_502.log")])
    out = capsys.readouterr().out
    assert rc == 1
    assert out.startswith("crashed (warmup_failed) during warmup")
    assert "decisive: Initialization failed. warmup error" in out
    assert "timeline:" in out


def test_stdin(monkeypatch, capsys):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("[2026-10-30 12:00:00] The server is fired up and ready to roll!\n"))
    assert main(["classify-log", "-", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "ready"


def test_unreadable_file(capsys, tmp_path):
    assert main(["classify-log", str(tmp_path / "nope.log")]) == 3
    assert "cannot read" in capsys.readouterr().err


def test_console_entry_point_runs_as_module():
    proc = subprocess.run(
        [
            sys.executable, "-m", "moesweep.cli", "classify-log",
            str(FIXTURES / "flag_invalid_choice_attention_backend.log"), "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["cause"] == "flag_error"
