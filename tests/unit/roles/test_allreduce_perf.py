"""The role's measuring program (roles/sglang_server/files/allreduce_perf.py) where it can run without a GPU: its
refusals, its nccl-tests time column and its NCCL version text. The measurement itself runs on the device
(bench/device/interconnect_facts.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types

import pytest
from ansible_collections.moesweep.sweep.plugins.module_utils import interconnect as ic
from helpers.paths import REPO

PROGRAM = REPO / "roles" / "sglang_server" / "files" / "allreduce_perf.py"


def load():
    spec = importlib.util.spec_from_file_location("allreduce_perf", PROGRAM)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_time_column_is_nccl_tests_and_parses_back():
    prog = load()
    assert [prog._time_text(t).strip() for t in (43.184, 124.81, 16253.4)] == ["43.18", "124.8", "16253"]
    line = f"{12288:12d}  {6144:12d}  bfloat16     sum      -1  {prog._time_text(43.56)}    0.28    0.49    N/A"
    row = ic.parse_all_reduce_perf(line)["rows"][0]
    assert (row["bytes"], row["time_us"], row["busbw_gbs"]) == (12288, 43.56, 0.49) and row["in_place"] is None


def test_sizes_double_from_min_to_max():
    assert list(load()._sizes(4096, 65536)) == [4096, 8192, 16384, 32768, 65536]


@pytest.mark.parametrize("version, text", [((2, 27, 3), "2.27.3"), (22703, "2.27.3"), (2708, "2.7.8")])
def test_nccl_version_text(version, text):
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(nccl=types.SimpleNamespace(version=lambda: version)))
    assert load()._nccl_version(fake) == text


def test_without_torch_it_says_which_python_lacks_it(tmp_path):
    # a python whose import of torch fails, as the server venv's would if sglang_env never installed it
    (tmp_path / "torch.py").write_text("raise ImportError('No module named torch (test)')\n")
    done = subprocess.run([sys.executable, str(PROGRAM), "--ngpus", "1"], capture_output=True, text=True,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.returncode == 2 and "torch is not importable with" in done.stderr and done.stdout == ""
