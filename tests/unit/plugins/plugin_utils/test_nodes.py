"""The node group as pure functions: ranks from the group's order or from every host's sglang_server_node_rank,
each refusal naming the problem and the fix (one host, ranks set on some hosts, duplicated or with gaps, ports
that disagree, a rank not in the play, another strategy than linear, launch flags that contradict the group), the
flags each rank gets, and the barriers (ports, restart, release, readiness) deciding the same on every rank."""

from __future__ import annotations

import pytest
from ansible_collections.moesweep.sweep.plugins.plugin_utils import nodes

HOSTS = ["node-a", "node-b"]
ADDR = {"node-a": "10.0.0.1", "node-b": "10.0.0.2"}


def inputs(host="node-a", members=None, ranks=None, ports=None, alive=None, strategy="linear", addresses=None):
    members = list(members or HOSTS)
    return {"group": "sglang_nodes", "members": members, "ranks": ranks or {m: None for m in members},
            "addresses": addresses or ADDR, "ports": ports or {m: 25000 for m in members},
            "alive": members if alive is None else alive, "host": host, "strategy": strategy}


def plan(**kw):
    return nodes.plan_nodes(inputs(**kw))


# ------------------------------------------------------------------------------------------------ ranks


def test_ranks_follow_the_groups_order_and_rank_0_gives_the_dist_init_addr():
    p = plan(host="node-b")
    assert p["hosts"] == HOSTS and p["rank"] == 1 and p["nnodes"] == 2
    assert p["dist_init_addr"] == "10.0.0.1:25000" and p["dist_init_port"] == 25000
    assert p["record_host"] == "node-a" and p["recorder"] == "node-a"
    assert plan(host="node-a")["rank"] == 0


def test_explicit_ranks_reorder_the_group():
    p = plan(host="node-a", ranks={"node-a": 1, "node-b": "0"})
    assert p["hosts"] == ["node-b", "node-a"] and p["rank"] == 1
    assert p["dist_init_addr"] == "10.0.0.2:25000" and p["record_host"] == "node-b"


def test_an_ipv6_rank_0_is_bracketed():
    assert nodes.dist_init_addr("fd00::1", 25000) == "[fd00::1]:25000"
    assert nodes.dist_init_addr("10.0.0.1", "26000") == "10.0.0.1:26000"


def test_inputs_from_vars_reads_the_group_and_uses_this_hosts_port():
    hostvars = {"node-a": {"ansible_host": "10.0.0.1", "sglang_server_node_rank": None},
                "node-b": {"ansible_host": "10.0.0.2", "sglang_server_dist_init_port": 26000}}
    got = nodes.inputs_from_vars("sglang_nodes", hostvars, {"sglang_nodes": HOSTS}, HOSTS, "node-a", 25000)
    assert got["members"] == HOSTS and got["addresses"] == ADDR
    assert got["ports"] == {"node-a": 25000, "node-b": 26000}
    assert nodes.inputs_from_vars("sglang_nodes", hostvars, {"sglang_nodes": HOSTS}, HOSTS, "other", 25000) is None
    assert nodes.inputs_from_vars("sglang_nodes", hostvars, {}, HOSTS, "node-a", 25000) is None


# ------------------------------------------------------------------------------------------------ refusals


def refusal(**kw):
    with pytest.raises(nodes.NodeError) as exc:
        plan(**kw)
    return str(exc.value), exc.value.info


def test_duplicate_ranks_are_refused_naming_both_hosts_and_the_fix():
    msg, info = refusal(ranks={"node-a": 0, "node-b": 0})
    assert "node-a and node-b both have sglang_server_node_rank 0" in msg
    assert "its own rank, 0 to 1, each once" in msg
    assert info["record_host"] == "node-a" and info["recorder"] == "node-a"


def test_ranks_with_a_gap_or_on_some_hosts_only_are_refused():
    msg, _ = refusal(ranks={"node-a": 0, "node-b": 2})
    assert "ranks must be 0 to 1, each once" in msg and "missing 1" in msg
    msg, _ = refusal(ranks={"node-a": 0, "node-b": None})
    assert "set on node-a but not on node-b" in msg and "on every host of the group or on none" in msg
    msg, _ = refusal(ranks={"node-a": "zero", "node-b": 1})
    assert "is not an integer" in msg


def test_a_group_of_one_host_is_refused():
    msg, _ = refusal(members=["node-a"])
    assert "needs at least 2" in msg and "take node-a out of it to serve on one host" in msg


def test_ports_that_disagree_or_are_no_port_are_refused():
    msg, _ = refusal(ports={"node-a": 25000, "node-b": 26000})
    assert "disagree on sglang_server_dist_init_port" in msg and "node-b: 26000" in msg
    msg, _ = refusal(ports={"node-a": 0, "node-b": 0})
    assert "is not a TCP port" in msg


def test_a_rank_not_in_the_play_is_refused_naming_it_and_rank_0_still_records():
    msg, info = refusal(host="node-a", alive=["node-a"])
    assert "rank 1 (node-b) is not in the play" in msg and "unreachable" in msg
    assert "ansible -m ping node-b" in msg and "before any unit changes" in msg
    assert info["record_host"] == "node-a" and info["recorder"] == "node-a"
    # rank 0 gone: rank 1 writes the record, still under rank 0's name
    _msg, info = refusal(host="node-b", alive=["node-b"])
    assert info["record_host"] == "node-a" and info["recorder"] == "node-b"


def test_another_strategy_than_linear_is_refused():
    msg, _ = refusal(strategy="free")
    assert "needs the play's strategy linear" in msg and "sweep_strategy=linear" in msg
    assert plan(strategy="debug")["rank"] == 0
    assert plan(strategy=None)["rank"] == 0


# ------------------------------------------------------------------------------------------------ flags


def test_node_flags_set_nnodes_rank_and_the_address():
    out = nodes.node_flags(plan(host="node-b"), {"tp-size": 16, "port": 8000})
    assert out == {"tp-size": 16, "port": 8000, "nnodes": 2, "node-rank": 1, "dist-init-addr": "10.0.0.1:25000"}
    # the values the group gives anyway are accepted as given
    same = nodes.node_flags(plan(), {"tp-size": 16, "nnodes": 2, "--node-rank": 0, "dist-init-addr": "10.0.0.1:25000"})
    assert same["nnodes"] == 2 and same["node-rank"] == 0 and "--node-rank" not in same


def test_nnodes_that_is_not_the_groups_size_is_refused_with_the_fix():
    with pytest.raises(nodes.NodeError) as exc:
        nodes.node_flags(plan(), {"tp-size": 16, "nnodes": 3})
    msg = str(exc.value)
    assert "--nnodes 3 but node group sglang_nodes has 2 hosts (node-a, node-b)" in msg
    assert "drop nnodes from sglang_server_flags / sglang_server_extra_flags" in msg


def test_a_node_rank_or_dist_init_addr_that_contradicts_the_group_is_refused():
    with pytest.raises(nodes.NodeError, match="--node-rank 1 but node-a is rank 0"):
        nodes.node_flags(plan(), {"tp-size": 16, "node-rank": 1})
    with pytest.raises(nodes.NodeError, match="--nccl-init-addr 10.9.9.9:1 but node group"):
        nodes.node_flags(plan(), {"tp-size": 16, "nccl-init-addr": "10.9.9.9:1"})


def test_a_parallel_size_the_nodes_cannot_split_is_refused_as_sglang_would():
    with pytest.raises(nodes.NodeError) as exc:
        nodes.node_flags(plan(), {"tp-size": 3})
    assert "tp_size * pp_size % nnodes == 0" in str(exc.value) and "multiple of 2" in str(exc.value)
    assert nodes.node_flags(plan(), {"tp-size": 1, "pp-size": 2})["nnodes"] == 2


# ------------------------------------------------------------------------------------------------ barriers


def test_check_ports_refuses_a_taken_dist_init_port_on_rank_0_and_names_the_holder():
    p = plan()
    pre = {h: {"point": "triton", "launch": {"port": 8000, "launch_hash": h}} for h in HOSTS}
    free = {h: {"listeners": []} for h in HOSTS}
    assert nodes.check_ports(p, pre, free, {"listeners": []}, "sglang.service", "triton") is None
    taken = {"listeners": [{"pid": 77, "cmdline": "python3 -m http.server 25000"}]}
    msg = nodes.check_ports(p, pre, free, taken, "sglang.service", "triton")
    assert "rank 0 (node-a): the dist-init port 25000 (--dist-init-addr 10.0.0.1:25000)" in msg
    assert "PID 77 (python3 -m http.server 25000)" in msg and "set sglang_server_dist_init_port" in msg
    assert "nothing changed" in msg
    # the unit's own old server holds its ports: not taken
    own = {"listeners": [{"pid": 5, "cmdline": "sglang", "unit": "sglang.service"}]}
    assert nodes.check_ports(p, pre, {h: own for h in HOSTS}, own, "sglang.service", "triton") is None


def test_check_ports_refuses_when_another_ranks_preflight_refused():
    p = plan()
    pre = {"node-a": {"point": "triton", "launch": {"port": 8000}},
           "node-b": {"failed": True, "msg": "sweep point triton: no kernels"}}
    msg = nodes.check_ports(p, pre, {}, {}, "sglang.service", "triton")
    assert "rank 1 (node-b): its preflight refused the point: sweep point triton: no kernels" in msg
    stale = {h: {"point": "other", "launch": {"port": 8000}} for h in HOSTS}
    assert "no preflight for point triton" in nodes.check_ports(p, stale, {}, {}, "sglang.service", "triton")


def test_identity_is_the_same_on_every_rank_and_changes_with_any_ranks_launch():
    pre = {h: {"launch": {"launch_hash": "h-" + h}} for h in HOSTS}
    prov = {h: {"lock_sha256": "abc"} for h in HOSTS}
    a, b = nodes.identity(plan(), pre, prov), nodes.identity(plan(host="node-b"), pre, prov)
    assert a == b and a["lock_sha256"] == "abc" and len(a["launch_hash"]) == 64
    pre["node-b"]["launch"]["launch_hash"] = "other"
    assert nodes.identity(plan(), pre, prov)["launch_hash"] != a["launch_hash"]


def test_check_restart_restarts_every_rank_when_any_rank_needs_it():
    p = plan()
    ok = {h: {"changed": False, "ready_state": "ready"} for h in HOSTS}
    assert nodes.check_restart(p, ok) == {"restart": False, "reasons": []}
    one = dict(ok, **{"node-b": {"changed": True, "ready_state": "ready"}})
    assert nodes.check_restart(p, one) == {"restart": True, "reasons": ["rank 1 (node-b): unit or environment changed"]}
    down = dict(ok, **{"node-a": {"changed": False, "ready_state": ""}})
    assert nodes.check_restart(p, down)["reasons"] == ["rank 0 (node-a): not running"]


def test_check_released_needs_every_rank_released():
    p = plan()
    assert nodes.check_released(p, {h: {"released": True} for h in HOSTS}) is None
    msg = nodes.check_released(p, {"node-a": {"released": True}, "node-b": {"released": False, "msg": "GPU 0 held"}})
    assert "rank 1 (node-b): GPU 0 held" in msg and "none starts" in msg


def test_group_readiness_ready_when_every_rank_is():
    res = {h: {"state": "ready", "invocation_id": "i-" + h, "started": True} for h in HOSTS}
    out = nodes.group_readiness(plan(), res, {h: True for h in HOSTS})
    assert out["state"] == "ready" and out["node_rank"] == 0 and out["started"] is True
    assert [r["rank"] for r in out["nodes"]] == [0, 1] and out["nodes"][1]["invocation_id"] == "i-node-b"
    assert "all 2 ranks ready" in out["msg"]


def test_group_readiness_names_the_crashed_rank_before_the_hanging_one():
    res = {"node-a": {"state": "hang", "phase": "init", "verdict_at": 5.0},
           "node-b": {"state": "crashed", "cause": "killed", "phase": "load_weights", "verdict_at": 9.0,
                      "decisive_line": "unit failed: ExecMainCode=2 ExecMainStatus=9"}}
    out = nodes.group_readiness(plan(), res)
    assert out["state"] == "crashed" and out["cause"] == "killed"
    assert out["node_rank"] == 1 and out["node_host"] == "node-b"
    assert out["decisive_line"] == "unit failed: ExecMainCode=2 ExecMainStatus=9"
    assert out["msg"].startswith("node group sglang_nodes: rank 1 (node-b) crashed (killed) in load_weights: unit")
    assert "rank 0 (node-a) hang in init" in out["msg"]


def test_group_readiness_the_first_crash_decides_and_a_rank_without_result_is_stopped():
    res = {"node-a": {"state": "crashed", "cause": "oom", "verdict_at": 3.0},
           "node-b": {"state": "crashed", "cause": "killed", "verdict_at": 1.0}}
    assert nodes.group_readiness(plan(), res)["node_host"] == "node-b"
    out = nodes.group_readiness(plan(), {"node-a": {"state": "ready"}})
    assert out["state"] == "stopped" and out["node_rank"] == 1 and "no readiness result" in out["decisive_line"]
