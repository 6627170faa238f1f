#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
# This is an action-only module: the code is plugins/action/sglang_nodes.py (runs on the controller).

DOCUMENTATION = r"""
---
module: sglang_nodes
short_description: Judge every rank of a multi-node SGLang server together
description:
  - One barrier of a server spread over a node group (C(--nnodes), C(--node-rank), C(--dist-init-addr)). Run on
    every rank of the group in a play with the linear strategy, after a task every rank ran; it reads that task's
    registered result on each rank (host variables), so every rank reaches the same verdict, and a failure fails
    the point on every rank with the cause of the rank that explains it.
  - O(check=ports) - after every rank's M(moesweep.sweep.sglang_preflight) and M(moesweep.sweep.port_owner) -
    refuses the point when a rank's preflight refused it, a rank's server port is held by anything but O(unit),
    or rank 0's dist-init port is; returns the group's identity in RV(nodes) (C(launch_hash), C(lock_sha256))
    that resume compares.
  - O(check=restart) says whether the whole group restarts (RV(restart)) - any rank whose unit changed, that is
    not running or not serving; one rank never restarts alone.
  - O(check=released) fails unless every rank stopped and released its GPUs and port, so that no rank starts
    before every rank is down.
  - O(check=ready) - after every rank's M(moesweep.sweep.sglang_ready) - is ready when every rank is; otherwise it
    fails with the decisive rank's verdict (a crash before a missing rank before a hang or a timeout; among
    crashes the first seen), naming that rank in RV(node_rank) / RV(node_host), and every rank's own verdict
    in RV(nodes).
  - The decisions are pure functions in the collection's plugin_utils C(nodes).
version_added: 0.1.0
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.ACTION
  - moesweep.sweep.attributes.IDEMPOTENT
options:
  check:
    description:
      - Which barrier. Each reads fixed results of the C(moesweep.sweep.sglang_server) role on every rank -
        V(ports) C(__sglang_server_preflight), C(__sglang_server_port_owner), C(__sglang_server_dist_port_owner),
        C(sglang_server_provenance); V(restart) C(__sglang_server_node_state) (C({changed, ready_state}));
        V(released) C(__sglang_server_released); V(ready) O(ready_var) and O(started_vars).
    type: str
    required: true
    choices: [ports, restart, released, ready]
  nodes:
    description: The node plan M(moesweep.sweep.sglang_preflight) returned (its RV(moesweep.sweep.sglang_preflight#module:nodes)).
    type: dict
    required: true
  point:
    description: The sweep point; with O(check=ports) a rank whose preflight result is of another point counts as refused.
    type: str
  unit:
    description: The server's systemd unit; a port it holds itself is not taken.
    type: str
    default: sglang.service
  ready_var:
    description: With O(check=ready), the variable holding each rank's M(moesweep.sweep.sglang_ready) result.
    type: str
    default: __sglang_server_ready
  started_vars:
    description: With O(check=ready), variables holding each rank's start call (C(started) says whether it started the unit).
    type: list
    elements: str
    default: []
attributes:
  action:
    support: full
  check_mode:
    support: full
    details: It only reads other tasks' results.
  diff_mode:
    support: none
  idempotent:
    support: full
  platform:
    support: full
    platforms: posix
    details: Runs on the controller.
notes:
  - Needs the linear strategy (or debug), because with the free strategy a rank could read another rank's result
    of an earlier point. M(moesweep.sweep.sglang_preflight) refuses a node group in any other strategy.
seealso:
  - module: moesweep.sweep.sglang_preflight
  - module: moesweep.sweep.sglang_ready
  - module: moesweep.sweep.port_owner
"""

EXAMPLES = r"""
- name: Refuse the point on every rank when a port any rank needs is taken
  moesweep.sweep.sglang_nodes:
    check: ports
    nodes: "{{ sglang_server_nodes }}"
    point: flashinfer_cutlass
    unit: sglang.service

- name: Every rank ready, or the point fails with the decisive rank's cause
  moesweep.sweep.sglang_nodes:
    check: ready
    nodes: "{{ sglang_server_nodes }}"
  register: __ready
"""

RETURN = r"""
check:
  description: The barrier that ran.
  returned: always
  type: str
  sample: ready
stage:
  description: The sweep stage a failure of this barrier belongs to - V(preflight), V(restart) or V(readiness).
  returned: always
  type: str
  sample: readiness
group:
  description: The node group's inventory group.
  returned: always
  type: str
  sample: sglang_nodes
msg:
  description: The verdict in one line; a failure names each rank that is not ready, the decisive one first.
  returned: always
  type: str
  sample: "node group sglang_nodes: rank 1 (node-b) crashed (killed) in init: unit failed: ExecMainCode=2 ExecMainStatus=9; rank 0 (node-a) hang in init"
nodes:
  description: With O(check=ports), the node plan with the group's identity added; with O(check=ready), each rank's verdict.
  returned: when O(check=ports) or O(check=ready)
  type: raw
  sample: [{"rank": 0, "host": "node-a", "state": "hang"}, {"rank": 1, "host": "node-b", "state": "crashed", "cause": "killed"}]
verdict:
  description: V(unsupported) when O(check=ports) refuses the point.
  returned: when O(check=ports) refuses
  type: str
  sample: unsupported
restart:
  description: With O(check=restart), whether every rank restarts.
  returned: when O(check=restart)
  type: bool
  sample: true
reasons:
  description: With O(check=restart), why (one entry per rank that needs it).
  returned: when O(check=restart)
  type: list
  elements: str
  sample: ["rank 0 (node-a): unit or environment changed"]
state:
  description: With O(check=ready), the group's state - V(ready), or the decisive rank's V(crashed), V(stopped), V(hang), V(timeout).
  returned: when O(check=ready)
  type: str
  sample: crashed
cause:
  description: With O(check=ready), the decisive rank's crash cause (as M(moesweep.sweep.sglang_ready) returns it).
  returned: when O(check=ready)
  type: str
  sample: killed
decisive_line:
  description: With O(check=ready), the decisive rank's decisive line.
  returned: when O(check=ready)
  type: str
  sample: "unit failed: ExecMainCode=2 ExecMainStatus=9"
node_rank:
  description: With O(check=ready), the rank whose verdict is the group's (0 when every rank is ready).
  returned: when O(check=ready)
  type: int
  sample: 1
node_host:
  description: With O(check=ready), that rank's host.
  returned: when O(check=ready)
  type: str
  sample: node-b
readiness:
  description: With O(check=ready), the same verdict as one dict (what the sweep records as the point's readiness).
  returned: when O(check=ready)
  type: dict
"""
