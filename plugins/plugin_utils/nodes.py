# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""One SGLang server spread over several hosts: the node group, as pure functions on the controller.

sglang runs one multi-node server as the same command on every node with ``--nnodes N --node-rank i
--dist-init-addr <rank 0's address>:<port>`` (sglang 0.5.9 ``srt/server_args.py:3732-3741``; the address is
torch.distributed's ``tcp://`` init method, a TCPStore served by global rank 0: ``srt/model_executor/
model_runner.py:776-777``, ``init_distributed_environment`` at ``:804-811``). Node 0 runs the tokenizer and the
HTTP API; nodes >= 1 run their schedulers only and then ``launch_dummy_health_check_server`` on the same
``--host``/``--port``, which answers ``GET /ping``, ``/health`` and ``/health_generate`` with a bare 200
(``srt/entrypoints/engine.py:1040-1061``, ``srt/utils/common.py:2656-2712``). ``check_server_args`` asserts
``tp_size * pp_size % nnodes == 0`` before any process starts (``srt/server_args.py:5131-5134``).

An inventory group (``sglang_server_nodes_group``, default ``sglang_nodes``) lists the hosts of one server in
rank order, or every host sets ``sglang_server_node_rank``. ``plan_nodes`` turns the group into the plan every
rank computes alike (so a refusal is the same on every rank); ``node_flags`` puts it into the launch; the
``check_*`` functions are the group's barriers (every rank waits for the slowest at each one, the linear
strategy's per-task lockstep): a refusal or a failed rank fails the point on every rank, with that rank's cause.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

from ansible_collections.moesweep.sweep.plugins.module_utils import ports

DEFAULT_GROUP = "sglang_nodes"
RANK_VAR = "sglang_server_node_rank"
PORT_VAR = "sglang_server_dist_init_port"
# how a rank's server port is freed (the sglang_server role's configure.yml gives sglang_unit the same fix)
SERVER_PORT_FIX = "stop that process or choose another port in sglang_server_flags.port"
# the role's default for PORT_VAR (roles/sglang_server/defaults/main.yml), the example of sglang's --dist-init-addr help
DEFAULT_PORT = 25000
# Strategies that run a task on every host before the next task starts on any (debug is linear's subclass).
LOCKSTEP_STRATEGIES = ("linear", "debug")
# What the dummy health server of a rank >= 1 serves (srt/utils/common.py:2664-2677, sglang 0.5.9).
FOLLOWER_PATHS = ("/ping", "/health", "/health_generate")
# Flag names and their aliases (srt/server_args.py:3732-3741; --tp is only an argparse abbreviation).
_ALIASES = {"nccl-init-addr": "dist-init-addr", "tensor-parallel-size": "tp-size",
            "pipeline-parallel-size": "pp-size"}
# Readiness states, most decisive first: a crash explains the others' hang, a missing rank explains a hang.
_STATE_ORDER = ("crashed", "stopped", "hang", "timeout")
READINESS_KEYS = ("state", "cause", "phase", "after_ready", "decisive_line", "traceback", "timeline", "elapsed",
                  "health_sequence", "unit_state", "invocation_id", "started", "verdict_at", "lines_read")


class NodeError(ValueError):
    """A node group that cannot serve: the message names the problem and the fix. ``info`` says which host
    records the refused point (``record_host``) and which host writes that record (``recorder``)."""

    def __init__(self, msg, info=None):
        super(NodeError, self).__init__(msg)
        self.info = info or {}


def _get(mapping, key, default=None):
    try:
        value = mapping.get(key, default)
    except Exception:  # noqa: BLE001 - a host variable that cannot be templated counts as unset
        return default
    return default if value is None else value


def inputs_from_vars(group, hostvars, groups, play_hosts, host, default_port, strategy=None):
    """What ``plan_nodes`` needs, read from a task's variables: the group's members (inventory order), each
    member's explicit rank, address (``ansible_host``) and dist-init port (this host's value where a member's
    inventory does not set one: role defaults are not part of another host's hostvars), the hosts still in the
    play, this host, and the play's strategy. None when ``host`` is not in the group."""
    members = [str(m) for m in (groups or {}).get(group) or []]
    if host not in members:
        return None
    ranks, addresses, ports = {}, {}, {}
    for member in members:
        hv = _get(hostvars, member, {}) or {}
        ranks[member] = _get(hv, RANK_VAR)
        addresses[member] = str(_get(hv, "ansible_host", member))
        ports[member] = _get(hv, PORT_VAR, default_port)
    ports[host] = default_port  # this host's own value, with the role default where nothing else sets it
    return {"group": group, "members": members, "ranks": ranks, "addresses": addresses, "ports": ports,
            "alive": [str(h) for h in play_hosts or []], "host": host, "strategy": strategy}


def _as_int(value, what):
    if isinstance(value, bool):
        raise NodeError("%s %r is not an integer" % (what, value))
    try:
        out = int(str(value).strip())
    except (TypeError, ValueError) as exc:
        raise NodeError("%s %r is not an integer" % (what, value)) from exc
    return out


def _order(group, members, ranks):
    """The members in rank order: by explicit ``sglang_server_node_rank`` when every member sets one, else by
    their order in the group."""
    given = [m for m in members if ranks.get(m) is not None]
    if not given:
        return list(members)
    if len(given) != len(members):
        missing = [m for m in members if m not in given]
        raise NodeError("node group %s: %s is set on %s but not on %s: set it on every host of the group or on "
                        "none (then the hosts' order in the group gives their ranks)"
                        % (group, RANK_VAR, ", ".join(given), ", ".join(missing)))
    by_rank = {}
    for member in members:
        rank = _as_int(ranks[member], "node group %s: host %s: %s" % (group, member, RANK_VAR))
        if rank in by_rank:
            last = len(members) - 1
            raise NodeError("node group %s: hosts %s and %s both have %s %d: give each host of the group its own "
                            "rank, 0 to %d, each once" % (group, by_rank[rank], member, RANK_VAR, rank, last))
        by_rank[rank] = member
    wanted = set(range(len(members)))
    if set(by_rank) != wanted:
        raise NodeError("node group %s has %d hosts, so its ranks must be 0 to %d, each once; %s gives %s "
                        "(missing %s): fix the ranks"
                        % (group, len(members), len(members) - 1, RANK_VAR,
                           ", ".join(str(r) for r in sorted(by_rank)),
                           ", ".join(str(r) for r in sorted(wanted - set(by_rank)))))
    return [by_rank[r] for r in range(len(members))]


def _recorder(order, alive):
    return next((h for h in order if h in alive), order[0] if order else None)


def dist_init_addr(address, port):
    """``host:port`` for torch's ``tcp://`` init method; an IPv6 address in brackets."""
    address = str(address)
    if ":" in address and not address.startswith("["):
        address = "[%s]" % address
    return "%s:%d" % (address, int(port))


def plan_nodes(inputs):
    """The node plan of this host (``inputs`` from ``inputs_from_vars``): {group, nnodes, rank, hosts (rank
    order), addresses, dist_init_port, dist_init_addr, record_host (rank 0: the point's record is that host's),
    recorder (the first rank in the play: it writes the record)}. Raises NodeError naming the problem and the fix;
    every rank computes the same plan and the same refusal."""
    group = inputs["group"]
    members = list(inputs["members"])
    alive = set(inputs.get("alive") or [])
    host = inputs["host"]
    info = {"group": group, "members": members, "record_host": members[0] if members else host,
            "recorder": _recorder(members, alive) or host}
    try:
        if len(members) < 2:
            raise NodeError("node group %s lists only %s: one server over several hosts needs at least 2; add the "
                            "other hosts to %s (in rank order), or take %s out of it to serve on one host"
                            % (group, ", ".join(members) or "no host", group, ", ".join(members) or "it"))
        order = _order(group, members, inputs.get("ranks") or {})
        info.update(record_host=order[0], recorder=_recorder(order, alive) or host)
        ports = inputs.get("ports") or {}
        seen = {}
        for member in order:
            port = _as_int(ports.get(member), "node group %s: host %s: %s" % (group, member, PORT_VAR))
            if not 0 < port < 65536:
                raise NodeError("node group %s: host %s: %s %d is not a TCP port (1-65535)"
                                % (group, member, PORT_VAR, port))
            seen[member] = port
        if len(set(seen.values())) > 1:
            raise NodeError("the hosts of node group %s disagree on %s (%s): set it once for the group (the group's "
                            "vars)" % (group, PORT_VAR, ", ".join("%s: %d" % kv for kv in sorted(seen.items()))))
        strategy = inputs.get("strategy")
        if strategy is not None and str(strategy) not in LOCKSTEP_STRATEGIES:
            raise NodeError("node group %s serves one server from %d hosts, which needs the play's strategy linear "
                            "(every rank stopped and released before any starts, all ranks judged together); this "
                            "play runs strategy %s: run sweep.yml with -e sweep_strategy=linear (sweep.yml picks it "
                            "itself for a group named %s, or for -e sglang_server_nodes_group=%s)"
                            % (group, len(order), strategy, DEFAULT_GROUP, group))
        missing = [(rank, h) for rank, h in enumerate(order) if h not in alive]
        if missing:
            raise NodeError(
                "node group %s is incomplete in this run: %s not in the play (unreachable, failed earlier in this "
                "run, left out by --limit, or not in the play's hosts); a server over %d hosts cannot start "
                "without %s, so the point is refused on every rank before any unit changes. Make %s reachable "
                "(ansible -m ping %s) or take %s out of %s"
                % (group, ", ".join("rank %d (%s)" % m for m in missing) + (" is" if len(missing) == 1 else " are"),
                   len(order), "it" if len(missing) == 1 else "them", ", ".join(h for _, h in missing),
                   " ".join(h for _, h in missing), "it" if len(missing) == 1 else "them", group))
    except NodeError as exc:
        exc.info = info
        raise
    addresses = inputs.get("addresses") or {}
    port = seen[order[0]]
    named = {h: str(addresses.get(h) or h) for h in order}
    return {"group": group, "nnodes": len(order), "rank": order.index(host), "hosts": order,
            "addresses": named, "dist_init_port": port,
            # the nodes rank 0's benchmark watches (their dummy health servers, on the server's port)
            "followers": [{"rank": i, "host": h, "address": named[h]} for i, h in enumerate(order) if i],
            "dist_init_addr": dist_init_addr(addresses.get(order[0]) or order[0], port),
            "record_host": order[0], "recorder": info["recorder"]}


def _canonical(key):
    key = str(key)
    key = key[2:] if key.startswith("--") else key
    return _ALIASES.get(key, key)


def node_flags(plan, flags):
    """The launch flags of this rank: ``--nnodes``, ``--node-rank`` and ``--dist-init-addr`` from the plan. A
    flag the user gave that disagrees is refused naming both values; a tensor x pipeline parallel size that the
    nodes cannot split is refused as sglang would at start (srt/server_args.py:5131-5134)."""
    out = {}
    given = {}
    for key, value in flags.items():
        name = _canonical(key)
        if name in ("nnodes", "node-rank", "dist-init-addr"):
            given[name] = (key, value)
        else:
            out[key] = value
    group, nnodes, rank = plan["group"], plan["nnodes"], plan["rank"]
    hosts = ", ".join(plan["hosts"])
    if "nnodes" in given and given["nnodes"][1] is not None:
        key, value = given["nnodes"]
        if _as_int(value, "--nnodes") != nnodes:
            raise NodeError("the launch flags set --nnodes %s but node group %s has %d hosts (%s): drop nnodes from "
                            "sglang_server_flags / sglang_server_extra_flags (moesweep sets it from the group), or "
                            "make the group list every node" % (value, group, nnodes, hosts))
    if "node-rank" in given and given["node-rank"][1] is not None:
        key, value = given["node-rank"]
        if _as_int(value, "--node-rank") != rank:
            raise NodeError("the launch flags set --node-rank %s but %s is rank %d of node group %s (%s): drop "
                            "node-rank from the flags; give ranks with %s per host, or by the group's order"
                            % (value, plan["hosts"][rank], rank, group, hosts, RANK_VAR))
    if "dist-init-addr" in given and given["dist-init-addr"][1] is not None:
        key, value = given["dist-init-addr"]
        if str(value) != plan["dist_init_addr"]:
            raise NodeError("the launch flags set --%s %s but node group %s's rank 0 (%s) serves it at %s: drop it "
                            "from the flags (moesweep sets it from rank 0's ansible_host and %s)"
                            % (str(key).lstrip("-"), value, group, plan["hosts"][0],
                               plan["dist_init_addr"], PORT_VAR))
    sizes = {}
    for key, value in out.items():
        name = _canonical(key)
        if name in ("tp-size", "pp-size") and value is not None:
            sizes[name] = _as_int(value, "--" + name)
    tp, pp = sizes.get("tp-size", 1), sizes.get("pp-size", 1)
    if (tp * pp) % nnodes:
        fit = nnodes * max(1, tp // nnodes)
        raise NodeError("--tp-size %d x --pp-size %d cannot be split over the %d nodes of group %s: sglang asserts "
                        "tp_size * pp_size %% nnodes == 0 before it starts (srt/server_args.py check_server_args); "
                        "set sglang_server_flags.tp-size to a multiple of %d (e.g. %d: %d GPU(s) on each node)"
                        % (tp, pp, nnodes, group, nnodes, fit, fit // nnodes))
    out["nnodes"] = nnodes
    out["node-rank"] = rank
    out["dist-init-addr"] = plan["dist_init_addr"]
    return out


# ------------------------------------------------------------------------------------------------ barriers


def _label(plan, host):
    return "rank %d (%s)" % (plan["hosts"].index(host), host)


def check_ports(plan, preflights, server_ports, dist_port, unit, point=None):
    """After every rank's preflight: the refusal (a message) when a rank's preflight failed or did not run for this
    point, a rank's server port is held by anything but ``unit``, or rank 0's dist-init port is; else None.
    ``preflights`` / ``server_ports``: rank host -> that rank's registered result; ``dist_port``: rank 0's
    ``port_owner`` result for the dist-init port."""
    problems = []
    for host in plan["hosts"]:
        pre = preflights.get(host) or {}
        if not pre or pre.get("failed") or (point and pre.get("point") not in (None, point)):
            why = pre.get("msg") if pre.get("failed") else "no preflight for point %s there" % point
            problems.append("%s: its preflight refused the point: %s" % (_label(plan, host), why))
    for host in plan["hosts"]:
        result = server_ports.get(host) or {}
        port = ((preflights.get(host) or {}).get("launch") or {}).get("port")
        taken = ports.foreign(result.get("listeners"), unit)
        if taken:
            problems.append("%s: %s" % (_label(plan, host), ports.in_use_message(port, taken, SERVER_PORT_FIX)))
    taken = ports.foreign((dist_port or {}).get("listeners"), unit)
    if taken:
        problems.append("%s: the dist-init port %d (--dist-init-addr %s) is already in use by %s; stop that process "
                        "or set %s to a free port for the group"
                        % (_label(plan, plan["hosts"][0]), plan["dist_init_port"], plan["dist_init_addr"],
                           ports.holders(taken), PORT_VAR))
    if not problems:
        return None
    return "node group %s: the point is refused on every rank, nothing changed: %s" % (
        plan["group"], " | ".join(problems))


def identity(plan, preflights, provenances):
    """What identifies the group's configuration for resume, the same on every rank: every rank's launch hash
    (in rank order) and every rank's stack lock."""
    launches = [[rank, host, ((preflights.get(host) or {}).get("launch") or {}).get("launch_hash")]
                for rank, host in enumerate(plan["hosts"])]
    blob = json.dumps({"nodes": launches, "dist_init_addr": plan["dist_init_addr"]}, sort_keys=True)
    locks = sorted({str((provenances.get(h) or {}).get("lock_sha256") or "") for h in plan["hosts"]})
    return {"launch_hash": hashlib.sha256(blob.encode()).hexdigest(), "lock_sha256": ",".join(locks)}


def check_restart(plan, states):
    """Whether the whole group restarts: any rank whose unit or environment changed, that is not running, or that
    does not serve. One rank never restarts alone (the others would keep waiting on the old rendezvous).
    ``states``: host -> {changed, ready_state}. Returns {restart, reasons}."""
    reasons = []
    for host in plan["hosts"]:
        state = states.get(host) or {}
        if not state:
            reasons.append("%s: no state" % _label(plan, host))
        elif state.get("changed"):
            reasons.append("%s: unit or environment changed" % _label(plan, host))
        elif state.get("ready_state") != "ready":
            reasons.append("%s: %s" % (_label(plan, host), state.get("ready_state") or "not running"))
    return {"restart": bool(reasons), "reasons": reasons}


def check_released(plan, released):
    """After every rank stopped: the failure (a message) when a rank's GPUs or port were not released (no rank may
    start before every rank is down and released), else None."""
    problems = []
    for host in plan["hosts"]:
        result = released.get(host) or {}
        if result.get("released") is not True:
            problems.append("%s: %s" % (_label(plan, host), result.get("msg") or "not released"))
    if not problems:
        return None
    return "node group %s: not every rank stopped and released its GPUs and port, so none starts: %s" % (
        plan["group"], " | ".join(problems))


def _rank_summary(plan, host, result):
    result = dict(result or {})
    out = {"rank": plan["hosts"].index(host), "host": host, "address": plan["addresses"].get(host)}
    for key in READINESS_KEYS:
        if key in result:
            out[key] = result[key]
    if not out.get("state"):
        out.update(state="stopped", cause="other",
                   decisive_line="no readiness result: this rank failed before its server was judged (see its "
                                 "failed task in the run's output)")
    return out


def _decisive(bad):
    """The rank that explains the group's failure: the most decisive state; among crashes the first to be seen
    (the others' crashes or hangs usually follow from it), else the lowest rank."""
    def key(r):
        order = _STATE_ORDER.index(r["state"]) if r["state"] in _STATE_ORDER else len(_STATE_ORDER)
        at = r.get("verdict_at")
        return (order, at if isinstance(at, (int, float)) else float("inf"), r["rank"])
    return sorted(bad, key=key)[0]


def group_readiness(plan, results, started=None):
    """The readiness of the whole server from every rank's ``sglang_ready`` result (host -> result; a rank
    without one failed before it was judged). Ready when every rank is; otherwise the decisive rank's result
    (state, cause, phase, decisive line, traceback) with ``node_rank`` / ``node_host`` naming it. Always with
    ``nodes``: each rank's own verdict. ``started``: host -> whether this point started that rank's unit."""
    started = started or {}
    ranks = []
    for host in plan["hosts"]:
        summary = _rank_summary(plan, host, results.get(host))
        if host in started:
            summary["started"] = bool(started[host])
        ranks.append(summary)
    bad = [r for r in ranks if r["state"] != "ready"]
    pick = _decisive(bad) if bad else ranks[0]
    out = {key: pick[key] for key in READINESS_KEYS if key in pick}
    out.update(node_rank=pick["rank"], node_host=pick["host"],
               nodes=[{k: v for k, v in r.items() if k not in ("timeline", "traceback", "unit_state")}
                      for r in ranks])
    if not bad:
        out["started"] = any(r.get("started") for r in ranks)
        out["msg"] = "node group %s: all %d ranks ready (rank 0 %s serves the API; the others /health only)" % (
            plan["group"], len(ranks), plan["hosts"][0])
        return out
    parts = []
    for r in [pick] + [r for r in ranks if r is not pick]:
        line = "rank %d (%s) %s" % (r["rank"], r["host"], r["state"])
        if r["state"] != "ready":
            if r.get("cause"):
                line += " (%s)" % r["cause"]
            if r.get("phase"):
                line += " in %s" % r["phase"]
            if r is pick and r.get("decisive_line"):
                line += ": %s" % r["decisive_line"]
        parts.append(line)
    out["msg"] = "node group %s: %s" % (plan["group"], "; ".join(parts))
    return out
