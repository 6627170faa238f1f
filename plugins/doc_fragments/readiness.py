# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The options of a wait for one run of an SGLang unit, shared by the modules that wait (``sglang_ready``,
``sglang_restart``): documented once here, specified once in module_utils ``readiness.wait_spec`` (as
kubernetes.core's ``k8s_wait_options`` fragment and its spec)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options:
  host:
    description: Address the server listens on, for the health probe.
    type: str
    default: 127.0.0.1
  port:
    description: Server port.
    type: int
    default: 30000
  health_path:
    description:
      - HTTP path polled for readiness. SGLang returns 503 until warmup succeeds, then 200.
      - On a node rank >= 1 (O(node_rank)) only C(/ping), C(/health) and C(/health_generate) answer; any other path
        falls back to C(/health) there.
    type: str
    default: /health
  health_timeout:
    description:
      - Seconds one health probe may take. SGLang's C(/health) sleeps 1 s and then waits up to
        C(SGLANG_HEALTH_CHECK_TIMEOUT) (20 s) for a one-token generation before it answers, so the
        default outlasts that.
    type: float
    default: 25
  timeout:
    description: Seconds to wait in total before giving up with RV(state=timeout). Must be greater than 0.
    type: float
    default: 900
  stall_timeout:
    description:
      - Seconds without any new log line while still starting before the server is declared hung
        (RV(state=hang)). Must be greater than 0.
    type: float
    default: 300
  poll_interval:
    description: Seconds between health and unit polls; the journal is read as soon as it has data.
    type: float
    default: 0.1
  api_key:
    description: Bearer token sent with the health probe (SGLang C(--api-key)).
    type: str
  fail_on_error:
    description: Fail the task when the state is not V(ready). Set to V(false) to branch on RV(state).
    type: bool
    default: true
  node_rank:
    description:
      - The unit's C(--node-rank) on a multi-node server. V(0) (the default, also on one host) serves the API;
        a rank >= 1 serves only the dummy health endpoints and is ready when its health endpoint answers 200.
    type: int
    default: 0
"""
