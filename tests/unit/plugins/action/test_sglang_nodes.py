"""The sglang_nodes action: each barrier reads every rank's registered result from the host variables and gives
every rank the same verdict; skipped start calls are not starts; a plan that is not a node plan is refused."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleActionFail

# isort: split
from ansible_collections.moesweep.sweep.plugins.action import sglang_nodes as action

PLAN = {"group": "sglang_nodes", "nnodes": 2, "rank": 0, "hosts": ["node-a", "node-b"],
        "addresses": {"node-a": "10.0.0.1", "node-b": "10.0.0.2"}, "dist_init_port": 25000,
        "dist_init_addr": "10.0.0.1:25000", "record_host": "node-a", "recorder": "node-a"}


def args(check, **kw):
    out = {"check": check, "nodes": PLAN, "point": "triton", "unit": "sglang.service",
           "ready_var": "__sglang_server_ready", "started_vars": []}
    out.update(kw)
    return out


def test_ports_refuses_on_every_rank_when_one_ranks_preflight_failed():
    hostvars = {"node-a": {"__sglang_server_preflight": {"point": "triton", "launch": {"port": 8000}},
                           "__sglang_server_port_owner": {"listeners": []},
                           "__sglang_server_dist_port_owner": {"listeners": []}},
                "node-b": {"__sglang_server_preflight": {"failed": True, "msg": "no kernels"},
                           "__sglang_server_port_owner": {"listeners": []}}}
    for host in PLAN["hosts"]:
        out = action.judge(args("ports"), hostvars, host)
        assert out["failed"] is True and out["verdict"] == "unsupported" and out["stage"] == "preflight"
        assert "rank 1 (node-b): its preflight refused the point: no kernels" in out["msg"]
        assert len(out["nodes"]["launch_hash"]) == 64


def test_ready_reads_every_ranks_wait_and_ignores_skipped_starts():
    hostvars = {"node-a": {"__w": {"state": "ready", "invocation_id": "a1"}, "__s0": {"started": True},
                           "__s1": {"skipped": True, "started": False}},
                "node-b": {"__w": {"state": "crashed", "cause": "killed", "invocation_id": "b1",
                                   "decisive_line": "unit failed: ExecMainCode=2 ExecMainStatus=9"},
                           "__s0": {"skipped": True}, "__s1": {"started": True}}}
    out = action.judge(args("ready", ready_var="__w", started_vars=["__s0", "__s1"]), hostvars, "node-a")
    assert out["failed"] is True and out["stage"] == "readiness"
    assert (out["state"], out["node_rank"], out["node_host"]) == ("crashed", 1, "node-b")
    assert out["local_invocation_id"] == "a1" and out["readiness"]["node_host"] == "node-b"
    assert [r["started"] for r in out["nodes"]] == [True, True]
    hostvars["node-b"]["__w"] = {"state": "ready", "invocation_id": "b1"}
    out = action.judge(args("ready", ready_var="__w", started_vars=["__s0", "__s1"]), hostvars, "node-b")
    assert "failed" not in out and out["state"] == "ready" and out["local_invocation_id"] == "b1"


def test_restart_and_released():
    states = {h: {"__sglang_server_node_state": {"changed": False, "ready_state": "ready"}} for h in PLAN["hosts"]}
    assert action.judge(args("restart"), states)["restart"] is False
    states["node-b"]["__sglang_server_node_state"]["changed"] = True
    assert action.judge(args("restart"), states)["restart"] is True
    released = {"node-a": {"__sglang_server_released": {"released": True}}, "node-b": {}}
    out = action.judge(args("released"), released)
    assert out["failed"] is True and "rank 1 (node-b): not released" in out["msg"]


def test_a_plan_that_is_not_a_node_plan_is_refused():
    with pytest.raises(AnsibleActionFail, match="nodes must be the node plan"):
        action.judge(args("ready", nodes={"group": "x"}), {})
