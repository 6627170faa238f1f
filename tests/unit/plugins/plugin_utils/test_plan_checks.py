"""The sweep's inputs refused before any point runs, each naming the fix."""

from __future__ import annotations

import os

import pytest
from ansible_collections.moesweep.sweep.plugins.plugin_utils import plan_checks


@pytest.mark.parametrize("backend,backends,expected", [
    ("flashinfer_cutedsl", None, ["flashinfer_cutedsl"]),
    (None, ["a", "b"], ["a", "b"]),
    (None, "a,b", ["a", "b"]),
    (None, "[a, b]", ["a", "b"]),
    (None, "compatible", "compatible"),
])
def test_points(backend, backends, expected):
    assert plan_checks.parse_points(backend, backends) == expected


@pytest.mark.parametrize("backend,backends,needle", [
    ("a", ["b"], "not both"),
    (None, [], "empty list"),
    (None, "", "no sweep point"),
    (None, None, "no sweep point"),
    (None, ["a", "a"], "twice"),
    (None, ["a;reboot"], "not a plain name"),
    (["a"], None, "one name"),
])
def test_bad_points(backend, backends, needle):
    with pytest.raises(plan_checks.PlanError, match=None) as exc:
        plan_checks.parse_points(backend, backends)
    assert needle in str(exc.value)


def test_typo_suggests_the_closest_valid_name():
    with pytest.raises(plan_checks.PlanError) as exc:
        plan_checks.check_points(["flashinfer_cutlas"], {"custom": {}}, ["flashinfer_cutlass", "triton"])
    assert "did you mean 'flashinfer_cutlass'" in str(exc.value)
    plan_checks.check_points(["custom", "triton"], {"custom": {}}, ["triton"])


def test_results_dir_checks(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(plan_checks.PlanError, match="is a file"):
        plan_checks.check_results_dir(str(f), os.path.isdir, os.path.exists, os.access)
    ro = tmp_path / "ro"
    ro.mkdir()
    with pytest.raises(plan_checks.PlanError, match="not writable"):
        plan_checks.check_results_dir(str(ro / "results"), os.path.isdir, os.path.exists, lambda p, m: False)
    plan_checks.check_results_dir(str(tmp_path / "new" / "results"), os.path.isdir, os.path.exists, os.access)


def test_settings_checks():
    plan_checks.check_settings("best", 64, [1, 8, 64], "false")
    with pytest.raises(plan_checks.PlanError, match="reference concurrency 16 is not one of"):
        plan_checks.check_settings("best", 16, [1, 8, 64], "false")
    with pytest.raises(plan_checks.PlanError, match="restore must be one of"):
        plan_checks.check_settings("latest", 64, [64], "false")


def test_sweep_id_is_stable_and_plain():
    a = plan_checks.sweep_id_for(["x", "y"], ["h2", "h1"], {"input_len": 1})
    assert a == plan_checks.sweep_id_for(["x", "y"], ["h1", "h2"], {"input_len": 1}) and a.startswith("sweep-")
    assert a != plan_checks.sweep_id_for(["y", "x"], ["h1", "h2"], {"input_len": 1})
    with pytest.raises(plan_checks.PlanError):
        plan_checks.check_sweep_id("../etc")


def test_settings_that_must_be_numbers():
    plan_checks.check_numbers({"sglang_server_ready_timeout": "1800", "sglang_bench_input_len": 32})
    for bad in ("abc", 0, -5, True, None):
        with pytest.raises(plan_checks.PlanError) as exc:
            plan_checks.check_numbers({"sglang_server_ready_timeout": bad})
        message = str(exc.value)
        assert "sglang_server_ready_timeout" in message and "-e sglang_server_ready_timeout=1800" in message


def test_a_precision_the_budget_cannot_reach_is_a_warning_with_its_cost():
    levels = {"concurrency": [1, 8, 32, 64], "level_budget_s": 900}
    warning = plan_checks.precision_warning(dict(levels, precision=1e-6))
    # the floor: 1.96 x the H100 drift's standard error over the 900 s budget (bench_stats.drift_se_rel)
    assert "+-0.0001 %" in warning and "+-0.21 %" in warning and "4 level(s) = about 60 min" in warning
    assert "sglang_bench_precision=0.0021" in warning
    assert plan_checks.precision_warning(dict(levels, precision=0.02)) is None
    assert plan_checks.precision_warning(dict(levels, precision=0)) is None  # 0: the fixed counts, no target
    assert plan_checks.precision_warning({"precision": 0.004, "level_budget_s": 60}) is not None
