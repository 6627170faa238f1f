"""Point, restore and interconnect records: what they keep, what they redact, reading them back (a torn
or whole last line), and resume by configuration hash."""

from __future__ import annotations

import json

from ansible_collections.moesweep.sweep.plugins.plugin_utils import records
from helpers.point_records import OK_BENCH, READY
from helpers.point_records import point_record as _rec


def test_record_is_redacted_and_complete():
    ctx = {"sweep_id": "s", "host": "h", "point": "p", "readiness": READY, "smoke": {"state": "ok"},
           "benchmark": OK_BENCH,
           "launch": {"backend": "triton", "argv": ["x", "--config", "/etc/moesweep/sglang.secrets.yaml"]},
           "failed_result": {}, "reference_concurrency": 8, "known_secrets": ["hf_supersecretvalue1234"],
           "provenance": {"note": "token hf_supersecretvalue1234"}}
    rec = records.build_point_record(ctx)
    assert rec["schema"] == records.SCHEMA and rec["status"] == "passed" and rec["backend"] == "triton"
    assert "hf_supersecret" not in json.dumps(rec) and rec["secrets"] == "redacted"
    assert rec["launch"]["argv"][-1] == "/etc/moesweep/sglang.secrets.yaml"  # a path, not a secret: kept


def test_read_points_skips_a_torn_last_line(tmp_path):
    path = tmp_path / "points.jsonl"
    path.write_bytes(b'{"kind": "point", "point": "a"}\n{"kind": "point", "po')
    assert [r["point"] for r in records.read_points(str(path))] == ["a"]
    assert records.read_points(str(tmp_path / "missing")) == []


def test_read_points_keeps_a_whole_last_record_without_newline(tmp_path):
    """A file whose last record lacks its newline (written by hand, by another tool, or cut after the closing brace)
    still holds that record: `moesweep report` shows it and resume skips its point (re-probe #37 item 6)."""
    path = tmp_path / "points.jsonl"
    path.write_bytes(b'{"kind": "point", "point": "a"}\n{"kind": "point", "point": "b", "status": "passed"}')
    assert [r["point"] for r in records.read_points(str(path))] == ["a", "b"]
    path.write_bytes(b'{"kind": "point", "point": "b", "status": "passed"}')
    assert [r["point"] for r in records.read_points(str(path))] == ["b"]


def test_resume_finds_only_a_passing_record_of_that_host_and_configuration():
    recs = [_rec("a", "crashed", config="c1"), _rec("a", "passed", 100, config="c1"), _rec("b", "passed", 5, host="x")]
    assert records.passing_record(recs, "h", "c1")["point"] == "a"
    assert records.passing_record(recs, "h", "c2") is None
    assert records.passing_record(recs, "h", records.config_hash("l", {"a": 1}, "s")) is None
    assert records.config_hash("l", {"a": 1}, "s") != records.config_hash("l", {"a": 2}, "s")


def test_restore_record_status():
    assert records.build_restore_record({"action": "point", "readiness": READY})["status"] == "passed"
    failed = records.build_restore_record({"action": "point", "readiness": {"state": "crashed", "cause": "oom"}})
    assert failed["status"] == "failed" and failed["cause"] == "oom"
    assert records.build_restore_record({"action": "previous", "previous_active": False})["status"] == "passed"


def test_a_restarts_release_wait_is_kept_in_the_record():
    released = {"stopped": True, "released": True, "elapsed": 0.41, "holders": [], "port_holders": [],
                "memory_used_mib": [3, 3]}
    ctx = {"sweep_id": "s", "host": "h", "point": "p", "readiness": dict(READY, released=released),
           "smoke": {"state": "ok"}, "benchmark": OK_BENCH, "launch": {"backend": "triton"}, "failed_result": {},
           "reference_concurrency": 8}
    assert records.build_point_record(ctx)["readiness"]["released"] == released


def test_a_point_records_the_model_it_served():
    staged = {"repo_id": "lukealonso/GLM-5-NVFP4", "revision": "3f0c1e2a9b8d7c6e5f4a3b2c1d0e9f8a7b6c5d4e",
              "local_path": "/var/lib/sglang/models/lukealonso/GLM-5-NVFP4", "bytes": 453000000000,
              "downloaded": False, "files": 97, "refetched": [], "changed": False}
    ctx = {"sweep_id": "s", "host": "h", "point": "p", "readiness": READY, "smoke": {"state": "ok"},
           "benchmark": OK_BENCH, "launch": {"backend": "triton"}, "failed_result": {}, "reference_concurrency": 8,
           "model": staged}
    assert records.build_point_record(ctx)["model"] == {k: staged[k] for k in records.MODEL_KEYS}
    # a pre-staged directory: only where it is
    ctx["model"] = {"local_path": "/models/GLM-5-NVFP4"}
    assert records.build_point_record(ctx)["model"] == {"local_path": "/models/GLM-5-NVFP4"}


# ------------------------------------------------------------------------------------------------ interconnect


def _measurement():
    from ansible_collections.moesweep.sweep.plugins.module_utils import interconnect
    from helpers.paths import FIXTURES

    table = interconnect.parse_all_reduce_perf(
        (FIXTURES / "interconnect" / "rtx4090-x8-sys-no-p2p.txt").read_text())
    return dict(table, key="k8", environment_text="NCCL_P2P_LEVEL=PHB", nccl_environment={"NCCL_P2P_LEVEL": "PHB"},
                model={"layers": 78, "hidden_size": 6144, "model_type": "glm_moe_dsa"}, elapsed=12.5,
                measured="2026-12-06T05:00:00Z", output="...")


def test_the_key_is_the_units_nccl_environment_and_tp_size():
    launch = {"flags": {"tp-size": 8}, "environment": {"NCCL_P2P_LEVEL": "PHB", "OMP_NUM_THREADS": "8"}}
    key, env, ranks = records.interconnect_key(launch)
    assert env == {"NCCL_P2P_LEVEL": "PHB"} and ranks == 8
    assert key == records.interconnect_key(dict(launch, environment={"NCCL_P2P_LEVEL": "PHB"}))[0]
    assert key != records.interconnect_key(dict(launch, flags={"tp-size": 4}))[0]
    assert records.interconnect_key({})[2] == 1


def test_a_resumed_sweep_finds_the_measurement_of_that_host_and_key(tmp_path):
    path = tmp_path / records.INTERCONNECT_FILE
    lines = [{"kind": "interconnect", "host": "h", "key": "k8", "finished": "1"},
             {"kind": "interconnect", "host": "x", "key": "k8", "finished": "2"},
             {"kind": "interconnect", "host": "h", "key": "k8", "finished": "3"}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"kind": "inter')
    found = records.read_interconnect(str(path))
    assert records.find_interconnect(found, "h", "k8")["finished"] == "3"
    assert records.find_interconnect(found, "h", "k4") is None


def test_interconnect_record_keeps_the_table_and_not_secrets():
    rec = records.build_interconnect_record({"sweep_id": "s", "host": "h", "point": "p",
                                             "measurement": _measurement(), "known_secrets": []})
    assert rec["kind"] == "interconnect" and rec["schema"] == records.INTERCONNECT_SCHEMA
    assert rec["key"] == "k8" and rec["ranks"] == 8 and len(rec["rows"]) == 25 and rec["model"]["layers"] == 78


def test_point_record_names_interconnect_bound_at_the_reference_level():
    levels = [{"concurrency": c, "ok": True, "figures": {"output_throughput": 100.0, "median_itl_ms": itl},
               "diagnosis": {"verdict": "launch_bound", "evidence": ["util 99 %"]}}
              for c, itl in ((1, 400.0), (64, 105.0))]
    ctx = {"sweep_id": "s", "host": "h", "point": "p", "readiness": READY, "smoke": {"state": "ok"},
           "benchmark": {"state": "ok", "levels": levels}, "failed_result": {}, "reference_concurrency": 64,
           "launch": {"backend": "triton", "flags": {"tp-size": 8, "max-running-requests": 64},
                      "environment": {"NCCL_P2P_LEVEL": "PHB"}},
           "interconnect": _measurement()}
    first = records.build_point_record(ctx)
    rec = records.build_point_record(ctx)  # built twice from the same results, as the action does: the same record
    assert first["benchmark"] == rec["benchmark"] and ctx["benchmark"]["levels"][1]["diagnosis"]["verdict"] == (
        "launch_bound")
    assert rec["diagnosis"]["verdict"] == "interconnect_bound"
    assert rec["diagnosis"]["telemetry_verdict"] == "launch_bound"
    assert rec["diagnosis"]["interconnect"]["share"] > 0.15
    low = rec["benchmark"]["levels"][0]["diagnosis"]
    assert low["verdict"] == "launch_bound" and low["interconnect"]["share"] < 0.15
    assert rec["interconnect"] == {"key": "k8", "environment_text": "NCCL_P2P_LEVEL=PHB", "ranks": 8,
                                   "nccl_version": None, "model": _measurement()["model"],
                                   "measured": "2026-12-06T05:00:00Z"}


def test_a_point_without_a_measurement_keeps_its_telemetry_verdict():
    levels = [{"concurrency": 8, "ok": True, "figures": {"output_throughput": 1.0, "median_itl_ms": 10.0},
               "diagnosis": {"verdict": "launch_bound", "evidence": []}}]
    rec = records.build_point_record({"benchmark": {"state": "ok", "levels": levels}, "readiness": READY,
                                      "reference_concurrency": 8})
    assert rec["diagnosis"]["verdict"] == "launch_bound" and "interconnect" not in rec


def test_the_servers_own_nccl_lines_name_the_transport_of_its_record():
    """A unit with NCCL_DEBUG=INFO: its journal's NCCL lines (here a public paste behind a launcher's logging prefix,
    tests/fixtures/nccl/SOURCES.md) are the server's own communicators, and the record's interconnect.transport is
    theirs; without channel lines the measurement's stays, marked as such."""
    from helpers.paths import FIXTURES

    journal = (FIXTURES / "nccl" / "p2p-ipc-python-logging-prefix-broken-lines-easydistill-4.txt").read_text()
    ctx = {"sweep_id": "s", "host": "h", "point": "p", "readiness": READY, "smoke": {"state": "ok"},
           "benchmark": {}, "failed_result": {}, "launch": {"backend": "triton", "flags": {"tp-size": 8}},
           "interconnect": dict(_measurement(), transport={"found": True, "transports": {"SHM": 15}, "pairs": []}),
           "journal": journal}
    rec = records.build_point_record(ctx)
    assert rec["interconnect"]["transport"]["source"] == "server journal"
    assert rec["interconnect"]["transport"]["transports"] == {"P2P/IPC": 3}
    rec = records.build_point_record(dict(ctx, journal="[2026-12-06 05:00:00 TP0] Load weight begin.\n"))
    assert rec["interconnect"]["transport"] == {"found": True, "transports": {"SHM": 15}, "pairs": [],
                                                "source": "measurement"}
    assert "interconnect" not in records.build_point_record(dict(ctx, interconnect={}, journal=None))


def test_a_record_keeps_what_sglangs_own_argument_handling_answered():
    dry = {"verdict": "refused", "where": "host", "gpus": "real", "stage": "server_args", "sglang_version": "0.5.9",
           "error": {"type": "AssertionError", "message": "Invalid quantization 'fp8'.", "file":
                     "sglang/srt/server_args.py", "line": 2137, "url": "https://github.com/sgl-project/sglang/blob/"
                     "v0.5.9/python/sglang/srt/server_args.py#L2137"},
           "resolved": {}, "notices": []}
    ctx = {"sweep_id": "s", "host": "h", "point": "flashinfer_cutlass", "failed_stage": "preflight",
           "preflight": {"verdict": "unsupported", "msg": "refused", "dry_run": dry}, "failed_result": {}}
    rec = records.build_point_record(ctx)
    assert rec["status"] == "refused" and rec["preflight"]["dry_run"] == dry


def test_a_record_names_the_model_its_launch_served():
    staged = {"repo_id": "lukealonso/GLM-5-NVFP4", "revision": "abc123", "local_path": "/var/lib/sglang/models/x"}
    served = {"flags": {"model-path": "/var/lib/sglang/models/x"}}
    assert records.model_of(staged, served)["revision"] == "abc123"
    # an extra flag or an overlay that names another model: the record never claims the staged one (#49)
    assert records.model_of(staged, {"flags": {"model-path": "/models/other"}}) == {"local_path": "/models/other"}
    assert records.model_of(staged, {"flags": {"model-path": "org/other"}}) == {"repo_id": "org/other"}
    assert records.model_of({"repo_id": "org/m"}, {"flags": {"model-path": "org/m"}}) == {"repo_id": "org/m"}
