"""Spreading a sweep's points over comparable hosts, and refusing hosts that differ."""

from __future__ import annotations

import pytest
from ansible_collections.moesweep.sweep.plugins.plugin_utils import plan_checks, spread


def _facts(**over):
    base = {"gpu_models": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"], "gpu_count": 8,
            "driver_version": "570.172.08", "interconnect": "pcie-phb", "virtualization": {"kind": "vm"}}
    base.update(over)
    return spread.comparable_facts(base, {"lock_sha256": "abc"})


def test_spread_over_comparable_hosts_runs_each_point_once():
    hosts = {f"h{i}": _facts() for i in range(1, 5)}
    points = ["a", "b", "c", "d", "e"]
    got = {h: spread.spread_points(points, hosts, h, "true")[0] for h in hosts}
    assert sorted(p for ps in got.values() for p in ps) == points
    assert got == {"h1": ["a", "e"], "h2": ["b"], "h3": ["c"], "h4": ["d"]}
    assert spread.spread_points(points, hosts, "h2", "false") == (points, ["h2"])


def test_spread_refuses_hosts_that_differ_naming_the_fact_and_the_hosts():
    hosts = {"h1": _facts(), "h2": _facts(driver_version="580.159.04")}
    with pytest.raises(plan_checks.PlanError) as exc:
        spread.spread_points(["a", "b"], hosts, "h1", "true")
    message = str(exc.value)
    assert "driver_version differs" in message and "h1" in message and "h2" in message and "by_facts" in message


def test_spread_by_facts_groups_identical_hosts():
    hosts = {"a1": _facts(), "a2": _facts(), "b1": _facts(gpu_count=4)}
    assert spread.spread_points(["x", "y"], hosts, "a1", "by_facts") == (["x"], ["a1", "a2"])
    assert spread.spread_points(["x", "y"], hosts, "a2", "by_facts") == (["y"], ["a1", "a2"])
    assert spread.spread_points(["x", "y"], hosts, "b1", "by_facts") == (["x", "y"], ["b1"])
