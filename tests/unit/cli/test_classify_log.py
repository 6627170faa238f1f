"""``moesweep classify-log``: JSON shape, human output and exit codes on the real-log corpus."""

from __future__ import annotations

import gzip
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


@pytest.mark.parametrize(
    "content,says",
    [
        (b"", "is empty"),
        (b"\n\n   \n", "holds only blank lines"),
        # an ELF header, as when the wrong file is passed
        (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4, "is not a text log (binary data)"),
        (b"\xff\xfe\xfd\xfc" * 64, "is not a text log (not UTF-8 text)"),
        # mtime=0: the same bytes at every collection (xdist's workers must collect the same test ids)
        (gzip.compress(b"[2026-10-30 12:00:00] The server is fired up and ready to roll!\n", mtime=0),
         "is gzip-compressed"),
        (b"LPKSHHRH" + bytes(248), "is a binary systemd journal file"),
    ],
)
def test_no_log_is_not_starting(capsys, tmp_path, content, says):
    path = tmp_path / "server.log"
    path.write_bytes(content)
    for extra in ([], ["--json"]):
        assert main(["classify-log", str(path), *extra]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""  # no verdict at all, so nothing that reads as "starting"
        assert f"moesweep classify-log: {path} {says}" in captured.err
        assert "no verdict" not in captured.err and "starting:" not in captured.err


def test_empty_stdin_is_named(monkeypatch, capsys):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert main(["classify-log", "-"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == "moesweep classify-log: standard input is empty: there is no log to classify"


def test_gzip_hint_names_the_command_to_run(capsys, tmp_path):
    path = tmp_path / "server.log.gz"
    path.write_bytes(gzip.compress((FIXTURES / "crash_warmup_502.log").read_bytes()))
    assert main(["classify-log", str(path)]) == 2
    assert f"(zcat {path} | moesweep classify-log -)" in capsys.readouterr().err


def test_text_with_a_few_bad_bytes_is_still_a_log(capsys, tmp_path):
    path = tmp_path / "server.log"
    path.write_bytes((FIXTURES / "crash_warmup_502.log").read_bytes() + b"\xff\xfe stray bytes\n")
    assert main(["classify-log", str(path), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["cause"] == "warmup_failed"


def test_reader_leaving_early_does_not_raise():
    # `moesweep classify-log x.log | head -1`: a reader that has gone is no Python traceback; the verdict
    # is still the exit status. The pipe's read end is closed before the command writes.
    proc = subprocess.Popen(
        [sys.executable, "-m", "moesweep.cli", "classify-log", str(FIXTURES / "crash_warmup_502.log")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
    )
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1, err
    assert "Traceback" not in err and "BrokenPipeError" not in err
