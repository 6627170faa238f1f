"""The staging's progress: the bytes on the disk (finished files and huggingface_hub's .incomplete files) against
the plan, and the rate and time left from two samples, in the line a poll shows."""

from __future__ import annotations

import os

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import stage_progress as sp

GB = 10 ** 9


def test_rate_and_time_left_from_two_samples():
    rate, eta = sp.rate_eta((100.0, 10 * GB), (110.0, 12 * GB), 453 * GB)
    assert rate == pytest.approx(0.2 * GB) and eta == pytest.approx(441 * GB / (0.2 * GB))
    assert sp.rate_eta((100.0, 5), (100.0, 9), 10) == (None, None)  # no time passed
    assert sp.rate_eta((100.0, 5), (110.0, 5), 10) == (0.0, None)  # stalled: no time left can be told
    assert sp.rate_eta((100.0, 9), (110.0, 5), 10) == (0.0, None)  # fewer bytes (a file fetched again): not < 0


def test_a_short_window_falls_back_to_the_rate_since_the_start():
    since = ((0.0, 0), (100.0, 100))
    assert sp.choose_window(((99.5, 90), (100.0, 100)), since) == since
    assert sp.choose_window(((98.0, 80), (100.0, 100)), since) == ((98.0, 80), (100.0, 100))
    assert sp.choose_window(None, since) == since


def test_the_line_a_poll_shows():
    assert sp.message("lukealonso/GLM-5-NVFP4", int(120.3 * GB), 453 * GB, 210e6, 1584.0) == (
        "lukealonso/GLM-5-NVFP4: 120.3 of 453.0 GB, 210.0 MB/s, about 26 min left")
    assert sp.message("org/m", 0, 453 * GB, None, None) == (
        "org/m: 0.0 of 453.0 GB, rate not known yet, time left not known yet")
    assert sp.message("org/m", 453 * GB, 453 * GB, None, None, finished_download=True).endswith(
        "453.0 of 453.0 GB, verifying the files against the hub's sizes and sha256s")
    assert sp.eta_text(42.4) == "about 42 s left"
    assert sp.eta_text(3 * 3600 + 5 * 60) == "about 3 h 05 min left"
    assert sp.size_of(1 << 20) == "1.0 MB" and sp.size_of(512) == "512.0 B"


def test_progress_from_the_plan_and_the_calls_window():
    doc = sp.plan("org/m", "c" * 40, [{"name": "a.safetensors", "size": 300}, {"name": "config.json", "size": 100}],
                  present=50, started=1000.0, pid=1)
    assert doc["bytes_total"] == 400 and doc["files"] == {"a.safetensors": 300, "config.json": 100}
    # the call's own window: 10 s, 100 bytes
    got = sp.progress(doc, ((1090.0, 150), (1100.0, 250)), 250, 1100.0)
    assert got["bytes_done"] == 250 and got["bytes_total"] == 400
    assert got["rate_bytes_s"] == 10.0 and got["eta_s"] == 15.0
    assert got["msg"] == "org/m: 250.0 of 400.0 B, 10.0 B/s, about 15 s left"
    # a call that ended at once: the mean since the plan, the bytes present at its start not counted as moved
    got = sp.progress(doc, ((1100.0, 250), (1100.2, 250)), 250, 1100.2)
    assert got["rate_bytes_s"] == pytest.approx(200 / 100.2, abs=0.1)
    # everything on the disk, the job still verifying: no rate nor time left
    got = sp.progress(doc, None, 400, 1200.0)
    assert got["eta_s"] is None and "verifying" in got["msg"]


def test_a_plan_older_than_the_job_is_not_the_jobs():
    doc = {"started": 1000.0, "files": {}}
    assert sp.of_job(doc, 999.0) and sp.of_job(doc, 1000.05)
    assert not sp.of_job(doc, 1500.0) and not sp.of_job(None, 0) and not sp.of_job({"started": "x"}, 0)


def test_measure_counts_finished_files_and_the_clients_incomplete_files(tmp_path):
    files = {"config.json": 10, "model-00001.safetensors": 1000, "sub/model-00002.safetensors": 1000}
    (tmp_path / "config.json").write_bytes(b"x" * 10)
    (tmp_path / "model-00001.safetensors").write_bytes(b"x" * 1000)
    # huggingface_hub 0.36: <local_dir>/.cache/huggingface/download/<dir of the file>/<hash>.<etag>.incomplete
    dl = tmp_path.joinpath(*sp.DOWNLOAD_DIR, "sub")
    dl.mkdir(parents=True)
    (dl / "Zm9v.0123abcd.incomplete").write_bytes(b"x" * 300)
    (dl / "model-00002.safetensors.metadata").write_text("commit\netag\n1.0\n")  # not a download's bytes
    assert sp.measure(str(tmp_path), files) == 1310
    # a stale copy in place and its replacement arriving: never more than the total
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "model-00002.safetensors").write_bytes(b"x" * 1000)
    assert sp.measure(str(tmp_path), files) == 2010


def test_the_plan_is_written_atomically_and_read_back(tmp_path):
    doc = sp.plan("org/m", "c" * 40, [{"name": "a", "size": 1}], 0, 1.0, os.getpid())
    sp.write_plan(str(tmp_path), doc)
    assert sp.read_plan(str(tmp_path)) == doc
    (tmp_path / sp.PLAN_FILE).write_text("{half")
    assert sp.read_plan(str(tmp_path)) is None
    assert sp.read_plan(str(tmp_path / "absent")) is None
