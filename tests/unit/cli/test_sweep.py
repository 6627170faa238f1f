"""moesweep sweep: bad input refused before anything runs (exit 2, no traceback), and the exit status told from
the records (0 all passed, 1 some points failed, 3 the restore failed, 130 interrupted)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from moesweep import api
from moesweep.cli import build_parser, main
from moesweep.commands import sweep


@pytest.mark.parametrize("argv,needle", [
    (["--backends", ","], "--backends is empty"),
    (["--backends", "triton,triton"], "twice"),
    (["--backends", "triton", "--backends", "flashinfer_cutlass"], "given 2 times"),
    ([], "--backends is required"),
    (["--backends", "triton", "-e", "novalue"], "use KEY=VALUE"),
    (["--backends", "triton", "-e", "backend=x"], "beside --backends"),
    (["--backends", "triton", "-e", "@/no/such/vars.yml"], "no such file"),
    (["--backends", "triton", "-i", "/no/such/inventory.yml"], "inventory /no/such/inventory.yml does not exist"),
])
def test_bad_input(argv, needle, capsys, tmp_path):
    assert main(["sweep", "--results", str(tmp_path), "--no-progress", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_results_path_that_is_a_file(capsys, tmp_path):
    f = tmp_path / "results"
    f.write_text("")
    assert main(["sweep", "--backends", "triton", "--results", str(f)]) == 2
    assert "is a file" in capsys.readouterr().err


def test_an_existing_sweep_id_is_refused_unless_resuming(tmp_path):
    (tmp_path / "s1").mkdir()
    with pytest.raises(api.MoesweepError, match="already exists"):
        list(api.iter_sweep(None, ["triton"], results_dir=tmp_path, sweep_id="s1", resume=False))


def test_missing_ansible_playbook_is_named(monkeypatch):
    monkeypatch.setattr(api.shutil, "which", lambda name: None)
    monkeypatch.setattr(api.os.path, "exists", lambda p: False)
    with pytest.raises(api.MoesweepError, match="ansible-playbook is not installed"):
        api._ansible_playbook_present()


def point(status, cause=None):
    rec = {"kind": "point", "host": "h", "point": "p-" + status, "status": status, "cause": cause}
    return api.PointResult.from_record(rec)


def restore(status):
    return api.RestoreResult.from_record({"kind": "restore", "host": "h", "action": "point", "point": "p",
                                          "status": status, "reason": "r"})


ARGS = SimpleNamespace(json=True)


@pytest.mark.parametrize("points,restores,interrupted,code", [
    ([point("passed")], [restore("passed")], False, 0),
    ([point("passed"), point("crashed", "oom")], [restore("passed")], False, 1),
    ([point("passed")], [restore("failed")], False, 3),
    ([point("interrupted")], [restore("passed")], True, 130),
])
def test_exit_codes(points, restores, interrupted, code, capsys):
    result = api.SweepResult("s", Path("/r/s"), points, restores, interrupted=interrupted, status="failed")
    assert sweep.report(ARGS, result, []) == code
    assert f'"exit": {code}' in capsys.readouterr().out


def test_the_exit_status_is_told_from_this_run_alone(capsys):
    """#37 item 4: an earlier run's failed restore (in points.jsonl) does not make this passing run exit 3; item 5:
    this run's crashed point is not hidden by an earlier passing record of the same point."""
    earlier = [point("passed")]
    result = api.SweepResult("s", Path("/r/s"), earlier, [restore("failed"), restore("passed")], status="successful",
                             run_points=[point("passed")], run_restores=[restore("passed")])
    assert sweep.report(ARGS, result, []) == 0
    capsys.readouterr()
    crashed = api.PointResult.from_record({"kind": "point", "host": "h", "point": "p-passed", "status": "crashed"})
    result = api.SweepResult("s", Path("/r/s"), earlier, [restore("passed")], status="failed",
                             run_points=[crashed], run_restores=[restore("passed")])
    assert sweep.report(ARGS, result, []) == 1


def test_records_that_could_not_be_written_exit_4_naming_where_they_are(capsys):
    """#37 item 1: the points passed, but a record could not reach points.jsonl."""
    result = api.SweepResult("s", Path("/r/s"), [point("passed")], [restore("passed")], status="failed",
                             run_points=[point("passed")], run_restores=[restore("passed")],
                             unrecorded=["/home/u/.local/state/moesweep/unwritten/s/1__h__p.json"])
    verify = api.Event("failed", host="h", detail={
        "task": "Check that every record of this run reached points.jsonl",
        "msg": "1 record(s) of h could not be written to /r/s/points.jsonl and are kept in /home/u/.local/state/...",
        "unrecorded": ["/home/u/.local/state/moesweep/unwritten/s/1__h__p.json"]})
    assert sweep.report(SimpleNamespace(json=False), result, [verify]) == 4
    err = capsys.readouterr().err
    assert "are kept in /home/u/.local/state" in err and "could NOT be written" in err


def test_could_not_run_names_the_reason(capsys):
    failed = api.Event("failed", host="h", detail={"msg": "sweep refused before any point ran: x"})
    assert sweep.report(ARGS, None, [failed]) == 2
    assert "sweep refused before any point ran: x" in capsys.readouterr().err


def test_help_documents_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sweep", "--help"])
    out = capsys.readouterr().out
    for code in ("0  every point passed", "1  the sweep ran", "2  the sweep could not run", "3  the points",
                 "4  records of this run could not be written", "130 interrupted"):
        assert code in out


def test_a_failure_outside_every_point_is_said(capsys):
    # the host's sweep lock held by another sweep: the plan exists, no point ran, no record says why
    result = api.SweepResult("s", Path("/r/s"), [], [], interrupted=False, status="failed")
    held = api.Event("failed", host="h1", detail={"task": "Take the host's sweep lock",
                                                   "msg": "h1 is being swept by alice@laptop since 12:00"})
    closing = api.Event("failed", host="h1", detail={"task": "Say which points did not pass (...)", "msg": "1 of 1"})
    assert sweep.report(SimpleNamespace(json=False), result, [held, closing]) == 2
    err = capsys.readouterr().err
    assert "h1: Take the host's sweep lock: h1 is being swept by alice@laptop since 12:00" in err
    assert "1 of 1" not in err
    assert sweep.report(ARGS, result, [held, closing]) == 2
    assert '"errors": [' in capsys.readouterr().out


MATRIX_FILE = """matrix:
  axes:
    moe-runner-backend: [flashinfer_cutlass, flashinfer_trtllm, triton]
    attention-backend: [flashinfer, trtllm_mla]
    fp8-gemm-backend: [cutlass, triton]
"""


@pytest.mark.parametrize("text,extra,needle", [
    ("matrix:\n  axes:\n    attention-backend: []\n", [], "axis 'attention-backend' is empty"),
    ("axes: {attention-backend: [fa3]}\n", [], "no top-level 'matrix' key"),
    ("matrix:\n  axes: {a: [1]}\n  exclude: [{b: 1}]\n", [], "names 'b', which is no axis"),
    (MATRIX_FILE, ["--backends", "triton"], "--matrix and --backends together"),
    (MATRIX_FILE, ["-e", "matrix=x"], "beside --backends / --matrix"),
    # 5 x 20 x 10: refused with its count at once, before ansible-playbook starts or any server is touched
    ("matrix:\n  axes:\n    moe-runner-backend: [triton, flashinfer_cutlass, cutlass, flashinfer_cutedsl, auto]\n"
     "    max-running-requests: [" + ", ".join(str(8 * i) for i in range(1, 21)) + "]\n"
     "    env:NCCL_P2P_LEVEL: [LOC, NVL, PIX, PXB, PHB, SYS, '0', '1', '2', '3']\n", [], "the matrix has 1000 cells"),
])
def test_a_bad_matrix_file_is_refused_before_anything_runs(text, extra, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(api, "run_playbook", lambda *a, **k: pytest.fail("the playbook ran"))
    path = tmp_path / "matrix.yml"
    path.write_text(text)
    assert main(["sweep", "--results", str(tmp_path), "--no-progress", "--matrix", str(path), *extra]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


@pytest.fixture
def handed(monkeypatch):
    """The extra variables each sweep hands ansible-playbook (the runner replaced: nothing runs)."""
    seen = []

    def fake_run(playbook, **kwargs):
        seen.append(kwargs["extravars"])
        return SimpleNamespace(rc=0, status="successful", canceled=False)

    monkeypatch.setattr(api, "run_playbook", fake_run)
    return seen


def test_the_cli_and_the_api_hand_the_playbook_the_same_matrix(tmp_path, handed):
    import yaml

    seen = handed
    path = tmp_path / "matrix.yml"
    path.write_text(MATRIX_FILE)
    main(["sweep", "--results", str(tmp_path), "--no-progress", "--matrix", str(path)])
    api.sweep(None, matrix=path, results_dir=tmp_path)
    api.sweep(None, matrix=yaml.safe_load(MATRIX_FILE)["matrix"], results_dir=tmp_path)
    assert len(seen) == 3 and seen[0] == seen[1] == seen[2]
    assert seen[0]["matrix"] == yaml.safe_load(MATRIX_FILE)["matrix"] and "backends" not in seen[0]
    with pytest.raises(api.MoesweepError, match="not both"):
        api.sweep(None, ["triton"], matrix=path)


def test_measure_equivalent_reaches_the_playbook_from_the_cli_and_the_api(tmp_path, handed):
    seen = handed
    main(["sweep", "--results", str(tmp_path), "--no-progress", "--backends", "triton,flashinfer_cutedsl"])
    main(["sweep", "--results", str(tmp_path), "--no-progress", "--backends", "triton,flashinfer_cutedsl",
          "--measure-equivalent"])
    api.sweep(None, ["triton", "flashinfer_cutedsl"], results_dir=tmp_path, measure_equivalent=True)
    assert [s["measure_equivalent"] for s in seen] == [False, True, True]
